// nginx as a peer of the gateway in bench/peers.mjs: Debian's nginx (nginx-light is enough), one
// worker, a plain reverse proxy with keep-alive connections to the upstream; and the same with
// libnginx-mod-http-lua doing what the gateway must at least do (what OpenResty and Kong build on):
// the bearer key's SHA-256 digest looked up in a Lua table of digests, and listPets' `limit` bound
// (1..100, else 400).
// Everything nginx writes (pid, error log, temp files) is in a temp dir removed at stop; nothing
// needs root. BENCH_NGINX names the binary, BENCH_NGINX_MODULES the folder of the .so modules.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KEY, freePort, processTree, sleep, spawnTracked, stopProcess } from './lib.mjs';

export const NGINX = process.env.BENCH_NGINX || 'nginx';

/** Where Debian puts dynamic modules (the .so files; modules-available holds the load_module lines). */
const MODULE_DIRS = [process.env.BENCH_NGINX_MODULES, '/usr/lib/nginx/modules', '/usr/share/nginx/modules', '/usr/lib64/nginx/modules'].filter(Boolean);

/** nginx's version ("1.22.1"), or undefined when it cannot be run. */
export function nginxVersion() {
  const r = spawnSync(NGINX, ['-v'], { encoding: 'utf8', timeout: 5000 });
  if (r.error !== undefined || r.status !== 0) return undefined;
  return /nginx\/(\S+)/.exec(r.stderr + r.stdout)?.[1];
}

/** The load_module paths for Lua (ndk first: the Lua module needs its symbols), or undefined. */
export function luaModules() {
  for (const dir of MODULE_DIRS) {
    const ndk = join(dir, 'ndk_http_module.so');
    const lua = join(dir, 'ngx_http_lua_module.so');
    if (existsSync(ndk) && existsSync(lua)) return [ndk, lua];
  }
  return undefined;
}

/** Why a target cannot run here (one line), or undefined when it can. */
export function nginxMissing(lua) {
  if (nginxVersion() === undefined) return `${NGINX} not found (apt-get install nginx-light, or BENCH_NGINX=/path/to/nginx)`;
  if (lua && luaModules() === undefined) return `ngx_http_lua_module.so and ndk_http_module.so not found in ${MODULE_DIRS.join(', ')} (apt-get install libnginx-mod-http-lua)`;
  return undefined;
}

/** A Lua string literal of the raw bytes of a buffer (decimal escapes: Lua 5.1 has no \\x). */
const luaBytes = (buf) => `"${Array.from(buf, (b) => `\\${b}`).join('')}"`;

/**
 * The access phase in Lua: 401 without a known key, 400 for a `limit` of listPets outside 1..100.
 * The key is hashed with OpenSSL's SHA256 through LuaJIT's FFI (what resty.sha256 does, without
 * needing lua-resty-string) and looked up in a table of digests, as the gateway keeps its keys.
 * Where the symbol cannot be reached, the lookup is of the keys themselves; init_by_lua writes which
 * to the error log (bench key lookup: ...), read back by startNginx.
 */
function luaBlocks() {
  const digest = luaBytes(createHash('sha256').update(KEY).digest());
  return {
    init: `
    init_by_lua_block {
      local ffi = require "ffi"
      local ok = pcall(ffi.cdef, "unsigned char *SHA256(const unsigned char *d, size_t n, unsigned char *md);")
      local md = ffi.new("unsigned char[32]")
      if ok then ok = pcall(function() return ffi.C.SHA256 end) end
      if ok then
        keys = { [${digest}] = true }
        lookup = function(token) ffi.C.SHA256(token, #token, md); return keys[ffi.string(md, 32)] end
        ngx.log(ngx.WARN, "bench key lookup: sha256")
      else
        keys = { ["${KEY}"] = true }
        lookup = function(token) return keys[token] end
        ngx.log(ngx.WARN, "bench key lookup: plain")
      end
      function deny(status, code, message)
        local body = '{"code":"' .. code .. '","message":"' .. message .. '","status":' .. status .. '}'
        ngx.status = status
        ngx.header["Content-Type"] = "application/json"
        ngx.header["Content-Length"] = #body
        ngx.print(body)
        return ngx.exit(status)
      end
    }`,
    access: `
      access_by_lua_block {
        local auth = ngx.var.http_authorization
        if auth == nil or auth:sub(1, 7) ~= "Bearer " then return deny(401, "invalid_api_key", "The API key is not valid.") end
        if not lookup(auth:sub(8)) then return deny(401, "invalid_api_key", "The API key is not valid.") end
        if ngx.var.uri == "/v1/pets" and ngx.req.get_method() == "GET" then
          local limit = ngx.var.arg_limit
          if limit ~= nil then
            local n = tonumber(limit)
            if n == nil or not limit:match("^%d+$") or n < 1 or n > 100 then return deny(400, "invalid_query", "limit must be an integer from 1 to 100") end
          end
        end
      }`,
  };
}

function config(dir, upstreamUrl, port, lua, mirror) {
  const up = new URL(upstreamUrl);
  const mir = mirror === undefined ? undefined : new URL(mirror);
  const blocks = lua ? luaBlocks() : undefined;
  const modules = lua ? luaModules().map((m) => `load_module ${m};`).join('\n') : '';
  const text = `
${modules}
worker_processes 1;
daemon off;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${join(dir, 'client_body')};
  proxy_temp_path ${join(dir, 'proxy')};
  fastcgi_temp_path ${join(dir, 'fastcgi')};
  uwsgi_temp_path ${join(dir, 'uwsgi')};
  scgi_temp_path ${join(dir, 'scgi')};
  keepalive_requests 1000000;
  upstream petstore { server ${up.hostname}:${up.port}; keepalive 128; keepalive_requests 1000000; }
  ${mir === undefined ? '' : `upstream mirror { server ${mir.hostname}:${mir.port}; keepalive 128; keepalive_requests 1000000; }`}
  ${blocks?.init ?? ''}
  server {
    listen 127.0.0.1:${port};
    ${
      mir === undefined
        ? ''
        : `location = /__mirror {
      internal;
      proxy_pass http://mirror$request_uri;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }`
    }
    location / {
      ${mir === undefined ? '' : 'mirror /__mirror;'}
      ${blocks?.access ?? ''}
      proxy_pass http://petstore;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      ${lua ? 'proxy_set_header Authorization "";' : ''}
      proxy_buffering on;
    }
  }
}
`;
  return text;
}

// A master killed with SIGKILL (bench/lib.mjs kills its children so when the harness exits early)
// leaves its worker running: the workers of every nginx still up are killed with it, and its
// temp dir removed.
const workers = new Set();
const dirs = new Set();
process.once('exit', () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  for (const pid of workers) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

function tcpReady(port) {
  return new Promise((resolvePromise) => {
    const socket = connect({ host: '127.0.0.1', port });
    const done = (ok) => {
      socket.destroy();
      resolvePromise(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => done(true));
  });
}

/**
 * nginx (lua: with the checks) in front of `upstreamUrl`, once it accepts connections (at most
 * `timeoutMs`). `mirror` (a URL): every request also sent there by the `mirror` directive, its
 * answer discarded (bench/shadow.mjs). Returns { url, pid, pids, how, stop }: `pids` are the
 * master and its worker (the CPU of both is the target's).
 */
export async function startNginx(upstreamUrl, { lua = false, mirror, timeoutMs = 10_000 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-gateway-bench-nginx-'));
  dirs.add(dir);
  const port = await freePort();
  const text = config(dir, upstreamUrl, port, lua, mirror);
  const conf = join(dir, 'nginx.conf');
  writeFileSync(conf, text);
  // Started as root, nginx runs its worker as `nobody`, which must reach the temp paths (nginx
  // chowns them to it); mkdtemp makes the folder 0700.
  chmodSync(dir, 0o755);
  for (const d of ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, d));
  // -e: the error log from the first line on (else nginx opens the compiled-in /var/log path).
  const child = spawnTracked(NGINX, ['-p', dir, '-e', join(dir, 'error.log'), '-c', conf]);
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (s) => (err = (err + s).slice(-3000)));
  let pids = [child.pid];
  const stop = async () => {
    await stopProcess(child);
    for (const pid of pids) workers.delete(pid);
    rmSync(dir, { recursive: true, force: true });
    dirs.delete(dir);
  };
  const log = () => (existsSync(join(dir, 'error.log')) ? readFileSync(join(dir, 'error.log'), 'utf8').slice(-2000) : '');
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      const why = `${err}${log()}`;
      await stop();
      throw new Error(`nginx exited before it listened (${child.exitCode ?? child.signalCode})\n${why}`);
    }
    if (await tcpReady(port)) {
      // The worker is forked after the listening socket is open: wait for it to appear.
      pids = processTree(child.pid);
      for (let i = 0; i < 50 && pids.length < 2; i++) {
        await sleep(20);
        pids = processTree(child.pid);
      }
      for (const pid of pids) if (pid !== child.pid) workers.add(pid);
      const lookup = /bench key lookup: (\w+)/.exec(log())?.[1];
      const how = lua ? (lookup === 'sha256' ? 'the SHA-256 digest (OpenSSL through LuaJIT FFI) in a Lua table of digests' : 'the key itself in a Lua table of keys (OpenSSL SHA256 not reachable through FFI)') : undefined;
      return { url: `http://127.0.0.1:${port}`, pid: child.pid, pids, how, stop };
    }
    await sleep(50);
  }
  const why = log();
  await stop();
  throw new Error(`nginx did not listen on 127.0.0.1:${port} within ${timeoutMs} ms\n${why}`);
}
