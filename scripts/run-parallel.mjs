// Runs the shell commands given as arguments at the same time and exits with the first non-zero
// status once every one has ended. `npm test` runs its three static steps with it (the build,
// the tests' build, lint): each is a single CPU-bound process that needs none of the others'
// output, so on two cores they end in about the time of the longest rather than of the sum.
// Each command's output is printed whole when it ends, so two commands' lines never interleave.
import { spawn } from 'node:child_process';

function run(command) {
  return new Promise((resolve) => {
    const out = [];
    const err = [];
    const child = spawn(command, { shell: true, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (chunk) => out.push(chunk));
    child.stderr.on('data', (chunk) => err.push(chunk));
    child.on('error', (e) => err.push(Buffer.from(String(e) + '\n')));
    child.on('close', (code, signal) => {
      const status = code ?? (signal === null ? 0 : 1);
      process.stdout.write(`> ${command}${status === 0 ? '' : ` (exit ${code ?? signal})`}\n`);
      process.stdout.write(Buffer.concat(out));
      process.stderr.write(Buffer.concat(err));
      resolve(status);
    });
  });
}

const statuses = await Promise.all(process.argv.slice(2).map(run));
process.exitCode = statuses.find((status) => status !== 0) ?? 0;
