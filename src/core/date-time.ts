/** Date-times as a policy file writes them (RFC 3339), shared by the policies that read one. */

/** Milliseconds of an RFC 3339 date-time, or NaN for a day that does not exist (Date.parse would roll 30 February over). */
export function parseDateTime(text: string): number {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})/.exec(text);
  if (m === null) return NaN;
  const [y, mo, d, h, mi, se] = m.slice(1).map(Number) as [number, number, number, number, number, number];
  const day = new Date(Date.UTC(y, mo - 1, d));
  if (day.getUTCMonth() !== mo - 1 || day.getUTCDate() !== d || h > 23 || mi > 59 || se > 59) return NaN;
  return Date.parse(text);
}
