#!/usr/bin/env node
// The CLI runs from the compiled output; `npm run build` (part of the set-up commands) makes it.
require('../dist/cli/main.js').main();
