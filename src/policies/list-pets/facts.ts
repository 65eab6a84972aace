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

/** The access-log fields of the parameters `params` (unique names, in order; filters named apart). */
export function declaresOf(params: readonly string[], filters: ReadonlySet<string>): Declarations {
  const fields: LogField[] = [];
  for (const name of new Set(params)) fields.push(Object.freeze({ name: filters.has(name) ? `${name}Filter` : name, slot: paramSlot(name) as Slot<string> }));
  return Object.freeze({ logFields: Object.freeze(fields) });
}
