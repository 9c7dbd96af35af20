/** Writes infra/aws/template.json from the code (`npm run infra:template`). */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { templateText } from './template.ts';

writeFileSync(join(import.meta.dirname, 'template.json'), templateText());
console.log('wrote infra/aws/template.json');
