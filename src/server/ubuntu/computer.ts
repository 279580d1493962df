// The desktop moved to ./desktop/ (desktop.ts wires computer.ts, x11.ts, xdotool.ts and the live
// view). This re-export only keeps `import { UbuntuDesktop } from './computer.js'` in index.ts
// working until that import points at ./desktop/desktop.js; then delete this file.
export { UbuntuDesktop } from './desktop/desktop.js';
