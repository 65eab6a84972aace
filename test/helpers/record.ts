/** ExchangeRecords for the operations tests: a plain listPets 200 unless told otherwise. */
import { DeclaredFacts, slot, type RecordFacts } from '../../src/core/facts.js';
import type { ExchangeRecord } from '../../src/core/record.js';
import { STATUS } from './pet-store.js';

/**
 * `limit` as text: list-pets keeps a number, but a record made here may carry any text in the
 * field (a hostile value, to show the line escapes it).
 */
const LIMIT_TEXT = slot<string>('limit');
/** The fields list-pets declares, under the same names. */
const LIST_FIELDS = Object.freeze([
  { name: 'limit', slot: LIMIT_TEXT },
  { name: 'statusFilter', slot: STATUS },
]);

/** The declared facts of a listPets record: `limit` and `statusFilter`, each when given. */
export function listFacts(limit?: string, statusFilter?: string): RecordFacts {
  const facts = new DeclaredFacts(LIST_FIELDS);
  facts.set(LIMIT_TEXT, limit);
  facts.set(STATUS, statusFilter);
  return facts;
}

/** A record's fields, and the declared facts list-pets would log, by their field names. */
export interface RecordOver extends Partial<ExchangeRecord> {
  readonly limit?: string | undefined;
  readonly statusFilter?: string | undefined;
}

export function record(over: RecordOver = {}): ExchangeRecord {
  const { limit, statusFilter, ...rest } = over;
  return {
    startedAt: Date.parse('2026-11-23T10:00:00.000Z'),
    durationMs: 12.5,
    requestId: 'req-1',
    method: 'GET',
    route: '/v1/pets',
    operation: 'listPets',
    status: 200,
    errorCode: undefined,
    rejectedBy: undefined,
    upstreamStatus: 200,
    upstreamMs: 7.25,
    upstreamFailure: undefined,
    bytesIn: 0,
    bytesOut: 321,
    clientAddress: '127.0.0.1',
    protocol: '1.1',
    consumer: 'team-a',
    facts: listFacts(limit, statusFilter),
    trace: undefined,
    ...rest,
  };
}
