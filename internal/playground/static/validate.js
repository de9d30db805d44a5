// @ts-check
// A JSON Schema validator for the subset of draft-07 (and OpenAPI 3.1
// schema objects) agentwire's documents use: type (one or a list;
// "integer" is a whole number), const, enum, properties, required,
// additionalProperties (false or a schema), items, minItems, maxItems,
// minimum, maximum, minLength, maxLength, pattern, format (uuid and
// date-time), oneOf, anyOf, allOf, not, and $ref to another document of
// the set ("usage.json"), into one ("usage.json#/properties/x") or into the
// same one ("#/components/schemas/Message"). Other keywords are
// annotations (title, description, examples, discriminator, ...). A
// keyword this file does not know is reported as an error, so that a new
// keyword in the documents cannot pass unchecked here.
//
// It is written for the playground (no third-party validator is vendored):
// the server sends the documents (/playground/schemas.json) and the page
// checks every frame against them.

/** @typedef {boolean | {[keyword: string]: unknown}} Schema */

/** Keywords that only describe. */
const annotations = new Set([
  "$schema", "$id", "$comment", "title", "description", "examples", "example", "default",
  "discriminator", "deprecated", "readOnly", "writeOnly", "x-ogen-time-format", "x-ogen-name",
]);

/** Keywords this validator checks. */
const checked = new Set([
  "type", "const", "enum", "properties", "required", "additionalProperties", "items", "minItems",
  "maxItems", "minimum", "maximum", "minLength", "maxLength", "pattern", "format", "oneOf", "anyOf",
  "allOf", "not", "$ref", "$defs", "definitions",
]);

const uuidRE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const dateTimeRE = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * @param {unknown} v
 * @returns {v is {[k: string]: unknown}}
 */
function isObject(v) {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * @param {unknown} a
 * @param {unknown} b
 * @returns {boolean}
 */
function equal(a, b) {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => equal(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => k in b && equal(a[k], b[k]));
  }
  return false;
}

/**
 * @param {unknown} v
 * @param {string} t
 */
function hasType(v, t) {
  switch (t) {
    case "null": return v === null;
    case "boolean": return typeof v === "boolean";
    case "string": return typeof v === "string";
    case "number": return typeof v === "number" && Number.isFinite(v);
    case "integer": return typeof v === "number" && Number.isInteger(v);
    case "array": return Array.isArray(v);
    case "object": return isObject(v);
  }
  return false;
}

/** @param {string} p */
function unescapePointer(p) {
  return p.replace(/~1/g, "/").replace(/~0/g, "~");
}

/** A set of schema documents by name, and what checks values against them. */
export class Validator {
  /** @param {Record<string, Schema>} docs the documents, by file name */
  constructor(docs) {
    /** @type {Record<string, Schema>} */
    this.docs = docs;
  }

  /**
   * Checks value against the document doc (or a part of it: a JSON
   * pointer after #). The answer lists what is wrong, empty when nothing.
   * @param {string} ref e.g. "agent_message.json" or "openapi.json#/components/schemas/AgentTextSSE"
   * @param {unknown} value
   * @returns {string[]}
   */
  validate(ref, value) {
    /** @type {string[]} */
    const errs = [];
    const [doc, schema] = this.resolve("", ref);
    this.check(schema, value, "", doc, errs);
    return errs;
  }

  /**
   * The schema a $ref names, and the document it is in.
   * @param {string} from the document the $ref is in
   * @param {string} ref
   * @returns {[string, Schema]}
   */
  resolve(from, ref) {
    const hash = ref.indexOf("#");
    const file = hash < 0 ? ref : ref.slice(0, hash);
    const pointer = hash < 0 ? "" : ref.slice(hash + 1);
    const doc = file === "" ? from : file.replace(/^\.\//, "");
    /** @type {unknown} */
    let node = this.docs[doc];
    if (node === undefined) throw new Error(`$ref ${ref}: no document ${doc}`);
    for (const part of pointer.split("/").filter((p) => p !== "")) {
      if (!isObject(node)) throw new Error(`$ref ${ref}: nothing at ${part}`);
      node = node[unescapePointer(part)];
    }
    if (typeof node !== "boolean" && !isObject(node)) throw new Error(`$ref ${ref}: not a schema`);
    return [doc, node];
  }

  /**
   * @param {Schema} schema
   * @param {unknown} v
   * @param {string} at where v is in the frame (a JSON pointer)
   * @param {string} doc the document schema is in
   * @param {string[]} errs
   */
  check(schema, v, at, doc, errs) {
    const here = at || "/";
    if (schema === true) return;
    if (schema === false) {
      errs.push(`${here}: not allowed`);
      return;
    }
    for (const k of Object.keys(schema)) {
      if (!checked.has(k) && !annotations.has(k)) errs.push(`${here}: the schema keyword ${k} is not supported by the playground's validator`);
    }
    if (typeof schema.$ref === "string") {
      const [d, s] = this.resolve(doc, schema.$ref);
      this.check(s, v, at, d, errs);
    }
    const t = schema.type;
    if (typeof t === "string" || Array.isArray(t)) {
      const types = typeof t === "string" ? [t] : t.map(String);
      if (!types.some((x) => hasType(v, x))) {
        errs.push(`${here}: is ${v === null ? "null" : Array.isArray(v) ? "an array" : typeof v}, not ${types.join(" or ")}`);
        return;
      }
    }
    if ("const" in schema && !equal(v, schema.const)) errs.push(`${here}: must be ${JSON.stringify(schema.const)}`);
    if (Array.isArray(schema.enum) && !schema.enum.some((e) => equal(v, e))) {
      errs.push(`${here}: must be one of ${schema.enum.map((e) => JSON.stringify(e)).join(", ")}`);
    }
    if (typeof v === "number") {
      if (typeof schema.minimum === "number" && v < schema.minimum) errs.push(`${here}: below the minimum ${schema.minimum}`);
      if (typeof schema.maximum === "number" && v > schema.maximum) errs.push(`${here}: above the maximum ${schema.maximum}`);
    }
    if (typeof v === "string") {
      const n = [...v].length;
      if (typeof schema.minLength === "number" && n < schema.minLength) errs.push(`${here}: shorter than ${schema.minLength}`);
      if (typeof schema.maxLength === "number" && n > schema.maxLength) errs.push(`${here}: longer than ${schema.maxLength}`);
      if (typeof schema.pattern === "string" && !new RegExp(schema.pattern, "u").test(v)) errs.push(`${here}: does not match ${schema.pattern}`);
      if (schema.format === "uuid" && !uuidRE.test(v)) errs.push(`${here}: not a UUID`);
      if (schema.format === "date-time" && !dateTimeRE.test(v)) errs.push(`${here}: not an RFC 3339 date-time`);
    }
    if (Array.isArray(v)) {
      if (typeof schema.minItems === "number" && v.length < schema.minItems) errs.push(`${here}: fewer than ${schema.minItems} items`);
      if (typeof schema.maxItems === "number" && v.length > schema.maxItems) errs.push(`${here}: more than ${schema.maxItems} items`);
      const items = schema.items;
      if (typeof items === "boolean" || isObject(items)) v.forEach((x, i) => this.check(items, x, `${at}/${i}`, doc, errs));
    }
    if (isObject(v)) {
      const props = isObject(schema.properties) ? schema.properties : {};
      if (Array.isArray(schema.required)) {
        for (const r of schema.required) if (!(String(r) in v)) errs.push(`${here}: ${r} is missing`);
      }
      for (const [k, x] of Object.entries(v)) {
        const p = props[k];
        if (typeof p === "boolean" || isObject(p)) {
          this.check(p, x, `${at}/${k}`, doc, errs);
          continue;
        }
        const extra = schema.additionalProperties;
        if (extra === false) errs.push(`${here}: ${k} is not allowed`);
        else if (isObject(extra)) this.check(extra, x, `${at}/${k}`, doc, errs);
      }
    }
    /** @param {Schema} s */
    const passes = (s) => {
      /** @type {string[]} */
      const e = [];
      this.check(s, v, at, doc, e);
      return e.length === 0;
    };
    /** @param {unknown} list @returns {Schema[]} */
    const schemas = (list) => (Array.isArray(list) ? list.filter((s) => typeof s === "boolean" || isObject(s)) : []);
    if (Array.isArray(schema.allOf)) for (const s of schemas(schema.allOf)) this.check(s, v, at, doc, errs);
    if (Array.isArray(schema.anyOf) && !schemas(schema.anyOf).some(passes)) errs.push(`${here}: matches none of anyOf`);
    if (Array.isArray(schema.oneOf)) {
      const n = schemas(schema.oneOf).filter(passes).length;
      if (n !== 1) errs.push(`${here}: matches ${n} of oneOf, not exactly one`);
    }
    if ((typeof schema.not === "boolean" || isObject(schema.not)) && passes(schema.not)) errs.push(`${here}: matches not`);
  }
}
