import { getEnvironment } from 'wasi:cli/environment@0.2.12';

let word = null;
// The setting WORD, read on the first call (not at the top level: that
// runs at build time).
function setting() {
  if (word === null) {
    word = Object.fromEntries(getEnvironment()).WORD || 'forbidden';
  }
  return word;
}
