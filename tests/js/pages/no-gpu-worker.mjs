// The package's worker with WebGPU hidden (as on a browser without it), for the fallback test.
Object.defineProperty(WorkerNavigator.prototype, 'gpu', { get: () => undefined, configurable: true });
await import('../../../src/js/worker.js');
