// tap's `node-arg` for every test process. `npm test` runs the test files as JavaScript compiled by
// `npm run build:tests` into .test-build/, which need no loader; a TypeScript test file named on the
// command line (`npx tap test/unit/auth.test.ts`) does, so tsx is registered for that file only.
// tsx's hooks see every module a process loads, tap's own included: about half a second of CPU per
// test process that a compiled file does not pay.
if (/\.[cm]?tsx?$/.test(process.argv[1] ?? '')) await import('tsx');
