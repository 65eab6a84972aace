/**
 * The library's entry point: `createGateway(config, env)` compiles a validated policy file once and
 * returns the gateway in force, which serves the same way on every front and upstream:
 * `nodeHandler()` for a node:http server of your own, `listen()` for the standalone server as
 * `petstore-gateway serve` runs it, `fastifyPlugin` for a Fastify application.
 *
 * @example
 *   import { createServer } from 'node:http';
 *   import { createGateway, loadPolicyFile } from 'petstore-gateway';
 *   const env = { env: process.env };
 *   const loaded = loadPolicyFile('policies/default.yaml', env);
 *   if (!loaded.ok) throw new Error('invalid policy file');
 *   const gateway = createGateway(loaded.config, env);
 *   const { handler } = gateway.nodeHandler({ log: console });
 *   createServer(handler).listen(8080);
 */
import type { Server } from 'node:http';
import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import type { ReferenceBackend } from '../backend/service.js';
import type { PolicyConfig, ServerConfig, UpstreamConfig } from '../config/types.js';
import type { Chain } from '../core/chain.js';
import type { HeaderRules } from '../core/headers.js';
import type { PolicyEnv, Problem } from '../core/policy.js';
import type { SecretSet } from '../core/redact.js';
import { petstoreGateway, type PetstoreGatewayOptions } from '../fronts/fastify.js';
import type { NodeServerHandle } from '../fronts/node-server.js';
import { compileGateway, GatewayHolder, type Gateway } from '../gateway.js';
import { buildServer } from './fastify.js';
import { buildProxyServer, createPetstoreHandler } from './http-proxy-3.js';
import type { EngineOptions, NodeEngine } from './node.js';
import { buildUndiciServer, createUndiciHandler } from './undici.js';

/** How the gateway reaches the upstream from a node:http handler. */
export type NodeUpstream = 'undici' | 'http-proxy-3';
/** The standalone servers, as `petstore-gateway serve --engine` names them. */
export type EngineName = NodeUpstream | 'fastify';

export interface NodeHandlerOptions extends EngineOptions {
  /** The upstream client: an undici Pool (the default, the least CPU per request) or http-proxy-3. */
  readonly upstream?: NodeUpstream;
}

export interface ListenOptions extends EngineOptions {
  /** `undici` by default. */
  readonly engine?: EngineName;
  /** The policy file's `server.host` and `server.port` by default; port 0 picks a free port. */
  readonly host?: string;
  readonly port?: number;
  /** For `engine: 'fastify'`: the pino logger Fastify itself uses; none by default. */
  readonly loggerInstance?: FastifyServerOptions['loggerInstance'];
}

/** A listening standalone server. */
export interface GatewayServer {
  readonly server: Server;
  /** Stops accepting, lets in-flight requests finish, then closes the upstream connections. */
  close(): Promise<void>;
}

/** The Fastify plugin of one gateway: `await app.register(gateway.fastifyPlugin, { log: app.log })`. */
export type GatewayFastifyPlugin = (app: FastifyInstance, options: Omit<PetstoreGatewayOptions, 'gateway'>) => Promise<void>;

async function listenNode(handle: NodeServerHandle, host: string, port: number): Promise<GatewayServer> {
  await new Promise<void>((resolve, reject) => {
    handle.server.once('error', (err) => {
      void handle.close();
      reject(err);
    });
    handle.server.listen(port, host, () => {
      resolve();
    });
  });
  return handle;
}

/**
 * The gateway in force, and the ways to serve it. It is the `GatewayHolder` of its servers, so
 * `reload(config)` changes the policy of every one of them at once (requests in flight keep
 * theirs), and one circuit breaker guards the upstream for all of them.
 *
 * It also reads as the compiled `Gateway` it holds (`config`, `chain`, ...), so code written for
 * the deprecated `createUndiciHandler(createGateway(config, env))` style keeps working.
 */
export class PetstoreGateway extends GatewayHolder implements Gateway {
  /** The Fastify plugin serving `/v1` of a host application with this gateway. */
  readonly fastifyPlugin: GatewayFastifyPlugin;

  constructor(
    private env: PolicyEnv,
    compiled: Gateway,
  ) {
    super(compiled);
    const plugin = async (app: FastifyInstance, options: Omit<PetstoreGatewayOptions, 'gateway'>) => {
      await app.register(petstoreGateway, { ...options, gateway: this });
    };
    // Not encapsulated: the gateway's guard of /v1 must see the host's routes.
    this.fastifyPlugin = fp(plugin, { name: 'petstore-gateway-instance', fastify: '5.x' });
  }

  /** A node:http request handler and the `close()` of its upstream connections. */
  nodeHandler(options: NodeHandlerOptions = {}): NodeEngine {
    return options.upstream === 'http-proxy-3' ? createPetstoreHandler(this, options) : createUndiciHandler(this, options);
  }

  /** The standalone server as `serve` runs it (the policy's socket limits, Error-shape answers to parser refusals), listening. */
  async listen(options: ListenOptions = {}): Promise<GatewayServer> {
    const host = options.host ?? this.server.host;
    const port = options.port ?? this.server.port;
    const engine = options.engine ?? 'undici';
    if (engine === 'fastify') {
      const app = await buildServer(this, options);
      await app.listen({ host, port });
      return { server: app.server, close: () => app.close() };
    }
    return listenNode(engine === 'undici' ? buildUndiciServer(this, options) : buildProxyServer(this, options), host, port);
  }

  /**
   * Compiles `config` and puts it in force, or returns the problems that prevent it (nothing changes
   * then; a changed `upstream` or `server` section needs a restart). `env` replaces the one the
   * gateway was created with (keys from the environment, say).
   */
  reload(config: PolicyConfig, env: PolicyEnv = this.env): Problem[] {
    const problems = this.replace(compileGateway(config, env, this.current.backend));
    if (problems.length === 0) this.env = env;
    return problems;
  }

  /** The policy file's `server` section of the gateway in force. */
  get server(): ServerConfig {
    return this.current.config.server;
  }

  // The compiled gateway in force, field by field: what the deprecated factories read.
  get config(): PolicyConfig {
    return this.current.config;
  }
  get chain(): Chain {
    return this.current.chain;
  }
  get headerRules(): HeaderRules {
    return this.current.headerRules;
  }
  get secrets(): SecretSet {
    return this.current.secrets;
  }
  get bodyLimit(): number {
    return this.current.bodyLimit;
  }
  get upstream(): UpstreamConfig {
    return this.current.upstream;
  }
  get upstreamOrigin(): string | undefined {
    return this.current.upstreamOrigin;
  }
  get upstreamBasePath(): string {
    return this.current.upstreamBasePath;
  }
  get backend(): ReferenceBackend | undefined {
    return this.current.backend;
  }
  get answerRules(): string {
    return this.current.answerRules;
  }
  get migrationRules(): Gateway['migrationRules'] {
    return this.current.migrationRules;
  }
}

/**
 * Compiles a validated policy file (`loadPolicyFile`, `parsePolicy`) once: the policies, the header
 * rules, the secrets to mask, the upstream. `backend` is the reference backend to use when
 * `upstream.url` is `builtin` (a fresh one by default).
 */
export function createGateway(config: PolicyConfig, env: PolicyEnv, backend?: ReferenceBackend): PetstoreGateway {
  return new PetstoreGateway(env, compileGateway(config, env, backend));
}
