/** The part of autocannon's API the bench uses (autocannon ships no types and @types/autocannon is not installed). */
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  namespace autocannon {
    interface Request {
      method?: string;
      path?: string;
      headers?: Record<string, string>;
      body?: string | Buffer;
      setupRequest?: (req: Request, context: Record<string, unknown>) => Request;
    }
    interface Options {
      url: string;
      connections?: number;
      duration?: number;
      amount?: number;
      pipelining?: number;
      method?: string;
      path?: string;
      headers?: Record<string, string>;
      body?: string | Buffer;
      timeout?: number;
      requests?: Request[];
    }
    interface Result {
      duration: number;
      errors: number;
      timeouts: number;
      non2xx: number;
      statusCodeStats?: Record<string, { count: number }>;
      requests: { total: number; average: number };
    }
    interface Instance extends EventEmitter {
      stop(): void;
    }
  }
  function autocannon(
    opts: autocannon.Options,
    cb: (err: Error | null, result: autocannon.Result) => void,
  ): autocannon.Instance;
  export default autocannon;
}
