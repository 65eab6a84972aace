/** ExchangeRecords for the operations tests: a plain listPets 200 unless told otherwise. */
import type { ExchangeRecord } from '../../src/core/record.js';

export function record(over: Partial<ExchangeRecord> = {}): ExchangeRecord {
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
    limit: undefined,
    statusFilter: undefined,
    ...over,
  };
}
