// Copies non-TypeScript assets (Lua scripts) from src/ to dist/ after tsc.
import { cpSync, existsSync } from 'node:fs';
if (existsSync('src/limiter/lua')) cpSync('src/limiter/lua', 'dist/limiter/lua', { recursive: true });
