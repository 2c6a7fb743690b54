// Stands in for @tensorflow/tfjs-core in the packaged tfjs-backend-webgpu bundle
// (scripts/package-vsix.sh): the extension's own bundle puts its tfjs-core here before it
// loads the backend (trainer/model/backend.ts), so that one tfjs-core serves both.
const tf = globalThis.__agentLabTfjsCore;
if (!tf) throw new Error('tfjs-backend-webgpu (packaged): load it through trainer/model/backend.ts, which provides tfjs-core');
module.exports = tf;
