/** Small HTTP helpers of the agent (shared with the handlers where the logic is the same). */
export { json, readBounded, readJson, pathParam } from '../handlers/http.ts';
