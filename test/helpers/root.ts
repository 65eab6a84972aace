import { basename, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The folder `npm test` compiles src/ and test/ into (`npm run build:tests`); tap runs the
 * compiled test files from there, so no test process pays for a TypeScript loader.
 */
export const TEST_BUILD_DIR = '.test-build';

const ABOVE_TEST = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * The repository's root, whether this module runs as test/helpers/root.ts (through tsx) or as
 * .test-build/test/helpers/root.js (compiled): files outside the compiled tree (dist/, docs/,
 * policies/, test/fixtures/, the .ts sources the meta tests read) are found from here.
 */
export const PROJECT_ROOT = basename(ABOVE_TEST) === TEST_BUILD_DIR ? dirname(ABOVE_TEST) : ABOVE_TEST;
