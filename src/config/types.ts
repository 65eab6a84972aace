/** The shape of a policy file once it is validated and its defaults filled in. */
import type { LogConfig } from '../ops/access-log.js';
import type { HeadersConfig } from '../core/headers.js';
import type { ServerConfig } from '../fronts/config.js';
import type { PolicyConfigs } from '../policies/index.js';
import type { UpstreamConfig } from '../upstreams/config.js';

export interface PolicyConfig {
  readonly version: 1;
  readonly upstream: UpstreamConfig;
  readonly server: ServerConfig;
  readonly headers: HeadersConfig;
  readonly log: LogConfig;
  readonly policies: PolicyConfigs;
}

export type { HeadersConfig, PolicyConfigs, ServerConfig, UpstreamConfig };
export type { ServerTlsConfig } from '../fronts/config.js';
export type { UpstreamTlsConfig } from '../upstreams/config.js';
