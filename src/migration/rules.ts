/**
 * The migration section compiled once per policy load: what a reload may change (the modes, the
 * percents, the shadow bounds, the comparison, the testers). The lane reads the rules in force on
 * each request; `next` itself and the store are read at start only (src/gateway.ts).
 */
import type { Api, ApiOperation } from '../api/model.js';
import type { Problem } from '../core/policy.js';
import { compileComparer } from './compare.js';
import type { MigrationConfig, OperationMigration } from './schema.js';
import type { ClientView, Comparison } from './types.js';

export interface MigrationRules {
  /** The operations not in legacy mode, by operationId; an operation absent here is legacy's. */
  readonly modes: ReadonlyMap<string, OperationMigration>;
  /** Every operation of the interface, by operationId. */
  readonly operations: ReadonlyMap<string, ApiOperation>;
  readonly shadow: MigrationConfig['shadow'];
  readonly tester: MigrationConfig['tester'];
  /** `mask`: the request's own secrets, masked in the samples first. */
  readonly compare: (legacy: ClientView, next: ClientView, mask?: (text: string) => string) => Comparison;
  /** The section as loaded, for the report (modes and thresholds). */
  readonly config: MigrationConfig;
}

export function compileMigration(config: MigrationConfig, api: Api, redact?: (text: string) => string): MigrationRules {
  const modes = new Map<string, OperationMigration>();
  for (const [id, m] of Object.entries(config.operations)) if (m.mode !== 'legacy') modes.set(id, m);
  return {
    modes,
    operations: new Map(api.operations.map((op) => [op.id, op])),
    shadow: config.shadow,
    tester: config.tester,
    compare: compileComparer({ ignore: config.compare.ignore, listOrder: config.compare.listOrder }, redact),
    config,
  };
}

/** Two base URLs of one backend: the same origin (host case and default port aside) and path, trailing slashes aside. */
function sameBackend(a: string, b: string): boolean {
  const norm = (u: string): string => {
    try {
      const url = new URL(u);
      return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
    } catch {
      return u.replace(/\/+$/, '');
    }
  };
  return norm(a) === norm(b);
}

/** Cross-field rules of the section: every operation named is the interface's; the legacy upstream is a URL. */
export function migrationProblems(config: MigrationConfig, api: Api, upstreamUrl: string): Problem[] {
  const problems: Problem[] = [];
  const ids = new Set(api.operations.map((op) => op.id));
  for (const id of Object.keys(config.operations)) {
    if (!ids.has(id)) problems.push({ path: `$.migration.operations.${id}`, message: `is not an operation of the interface (${[...ids].join(', ')})` });
  }
  if (upstreamUrl === 'builtin') problems.push({ path: '$.upstream.url', message: 'the migration lane needs a URL upstream (the legacy backend), not builtin' });
  const next = config.next as { url?: unknown };
  if (typeof next.url === 'string' && sameBackend(next.url, upstreamUrl)) {
    problems.push({ path: '$.migration.next.url', message: 'is the legacy upstream itself: next must be another backend' });
  }
  return problems;
}
