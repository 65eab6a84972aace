/**
 * What `list-pets` learns of a request's query, in slots of its own (src/core/facts.ts): each
 * query parameter of the interface, once validated, as applied (a default included). It offers
 * them to the access log: a parameter under its own name (`limit`), a list filter as
 * `<name>Filter` (`statusFilter`: the line's `status` is the HTTP status). No other value of the
 * client's query is kept.
 */
import { slot, type Declarations, type LogField, type Slot } from '../../core/facts.js';

const slots = new Map<string, Slot<number | string>>();

/** The slot of a query parameter, one per name for the process (a reload makes no new slot). */
export function paramSlot(name: string): Slot<number | string> {
  let s = slots.get(name);
  if (s === undefined) slots.set(name, (s = slot<number | string>(name)));
  return s;
}

/**
 * The fields an access line writes itself (src/ops/access-log.ts, pino's own included): a query
 * parameter of one of these names is logged as `<name>Param`, so a client can never write a
 * second `level` or `consumer` into the line, which a JSON reader would take as the real one.
 */
const LINE_FIELDS: ReadonlySet<string> = new Set([
  'level', 'time', 'pid', 'hostname', 'msg', 'reqId', 'method', 'route', 'operation', 'status', 'errorCode', 'rejectedBy', 'durationMs',
  'upstreamStatus', 'upstreamMs', 'upstreamFailure', 'bytesIn', 'bytesOut', 'client', 'protocol', 'consumer', 'consumerExpires', 'consumerScopes',
  // Declared by response-contract (its facts.ts): a parameter of that name must not shadow it.
  'contractViolation',
]);

/** The access-log name of a query parameter: its own, `<name>Filter` for a list filter, `<name>Param` for a line's own field. */
function logName(name: string, filters: ReadonlySet<string>): string {
  if (filters.has(name)) return `${name}Filter`;
  return LINE_FIELDS.has(name) ? `${name}Param` : name;
}

/** The access-log fields of the parameters `params` (unique names, in order; filters named apart). */
export function declaresOf(params: readonly string[], filters: ReadonlySet<string>): Declarations {
  const fields: LogField[] = [];
  for (const name of new Set(params)) fields.push(Object.freeze({ name: logName(name, filters), slot: paramSlot(name) as Slot<string> }));
  return Object.freeze({ logFields: Object.freeze(fields) });
}
