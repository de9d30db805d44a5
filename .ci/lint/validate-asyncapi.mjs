// Validates each AsyncAPI document named on the command line with the
// official AsyncAPI parser, resolving the payload $refs into ../schemas.
// Exits non-zero when any document has an error-severity diagnostic.
import { Parser, fromFile } from '@asyncapi/parser';

const parser = new Parser();
let failed = false;
for (const file of process.argv.slice(2)) {
  const { document, diagnostics } = await fromFile(parser, file).parse();
  const errors = diagnostics.filter((d) => d.severity === 0);
  for (const d of diagnostics) {
    const level = ['error', 'warning', 'info', 'hint'][d.severity] ?? 'note';
    console.log(`${file}: ${level}: ${d.code}: ${d.message} at ${JSON.stringify(d.path)}`);
  }
  if (!document || errors.length > 0) {
    failed = true;
    console.log(`${file}: INVALID`);
  } else {
    console.log(`${file}: valid AsyncAPI ${document.version()} with ${document.allMessages().length} messages`);
  }
}
process.exit(failed ? 1 : 0);
