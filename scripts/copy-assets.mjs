// Copies non-TypeScript assets (Lua scripts) from src/ to dist/ after tsc.
import { cpSync, existsSync } from 'node:fs';
if (existsSync('src/limiter/redis/lua')) cpSync('src/limiter/redis/lua', 'dist/limiter/redis/lua', { recursive: true });
