/** `serve --watch`: what tells a serving process that a file it reads has changed. */
import { readFileSync, realpathSync, watch } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from 'pino';

/** What a watched file is now: its content through every symlink, or why it cannot be read. */
function snapshotOf(file: string): string {
  try {
    return `${realpathSync(file)}\0${readFileSync(file, 'latin1')}`;
  } catch (err) {
    return `unreadable\0${(err as NodeJS.ErrnoException).code ?? ''}`;
  }
}

/**
 * Calls `onChange` (debounced, once per change) when what one of `files` holds changes: an in-place
 * write, an editor's rename into place, or a Kubernetes ConfigMap or Secret update. The kubelet
 * swaps a symlink (`..data`, through `..data_tmp`) that the file's own symlink goes through, so the
 * events name `..data`, never the file: every event in the file's directory is looked at, and the
 * file's resolved path and content decide whether it changed.
 */
export function watchFiles(files: readonly string[], onChange: () => void, log: Logger): void {
  if (files.length === 0) return;
  let last = files.map(snapshotOf).join('\0\0');
  let timer: NodeJS.Timeout | undefined;
  const fire = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      const now = files.map(snapshotOf).join('\0\0');
      if (now === last) return;
      last = now;
      onChange();
    }, 100);
  };
  for (const dir of new Set(files.map((f) => dirname(f)))) {
    try {
      // The directory: it sees a rename into place and a symlink swap as well as an in-place write.
      const watcher = watch(dir, fire);
      watcher.on('error', (err) => log.error({ err, dir }, '--watch: the directory can no longer be watched; reload with SIGHUP'));
      watcher.unref();
    } catch (err) {
      log.error({ err, dir }, '--watch: cannot watch the directory; reload with SIGHUP');
    }
  }
}


/** The interface document a policy names (`interface:`), watched with the policy file: a reload reads both. */
export function interfaceFiles(config: { readonly interface?: string; readonly api?: { readonly source: string } }): string[] {
  return config.interface === undefined || config.api === undefined ? [] : [config.api.source];
}
