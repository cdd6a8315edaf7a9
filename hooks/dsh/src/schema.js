/**
 * A validator for the JSON Schema subset DSH's tool registry enforces:
 * one scalar `type` (or none), object `properties`/`required`/boolean
 * `additionalProperties`, array `items`, scalar `enum`/`const`, exact-one
 * `oneOf`, and the annotations `description`, `title`, `default`,
 * `examples`.  The tools registered here are raw JSON-Schema definitions,
 * which own their input validation, so this checks the model's arguments;
 * the tests also use it on every output schema and canonical value.
 */

export const KEYWORDS = new Set([
  'type', 'oneOf', 'properties', 'required', 'additionalProperties', 'items', 'enum', 'const',
  'description', 'title', 'default', 'examples',
])

const TYPES = new Set(['object', 'array', 'string', 'number', 'integer', 'boolean', 'null'])

/** Problems with a schema itself (keywords outside the subset, bad shapes); [] when fine. */
export function schemaProblems(schema, path = '$') {
  const problems = []
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return [`${path}: not an object`]
  for (const key of Object.keys(schema)) {
    if (!KEYWORDS.has(key)) problems.push(`${path}: unsupported keyword "${key}"`)
  }
  if (schema.type !== undefined && !TYPES.has(schema.type)) problems.push(`${path}: unknown type ${JSON.stringify(schema.type)}`)
  if (schema.oneOf !== undefined) {
    if (!Array.isArray(schema.oneOf) || schema.oneOf.length < 2) problems.push(`${path}.oneOf: needs at least two branches`)
    else schema.oneOf.forEach((branch, i) => problems.push(...schemaProblems(branch, `${path}.oneOf[${i}]`)))
  }
  if (schema.properties !== undefined) {
    if (schema.type !== 'object') problems.push(`${path}.properties: only for type object`)
    for (const [name, sub] of Object.entries(schema.properties)) problems.push(...schemaProblems(sub, `${path}.properties.${name}`))
  }
  if (schema.required !== undefined) {
    for (const name of schema.required) {
      if (!schema.properties || !Object.hasOwn(schema.properties, name)) problems.push(`${path}.required: "${name}" is not a property`)
    }
  }
  if (schema.additionalProperties !== undefined && typeof schema.additionalProperties !== 'boolean') {
    problems.push(`${path}.additionalProperties: must be a boolean`)
  }
  if (schema.items !== undefined) {
    if (schema.type !== 'array') problems.push(`${path}.items: only for type array`)
    problems.push(...schemaProblems(schema.items, `${path}.items`))
  }
  return problems
}

function typeOf(value) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  return typeof value
}

function matchesType(type, value) {
  switch (type) {
    case 'object': return typeOf(value) === 'object'
    case 'array': return Array.isArray(value)
    case 'string': return typeof value === 'string'
    case 'number': return typeof value === 'number' && Number.isFinite(value)
    case 'integer': return Number.isInteger(value)
    case 'boolean': return typeof value === 'boolean'
    case 'null': return value === null
    default: return false
  }
}

/** Where `value` breaks `schema`; [] when it conforms. */
export function validate(schema, value, path = '$') {
  if (schema.oneOf) {
    const passing = schema.oneOf.filter(branch => validate(branch, value, path).length === 0).length
    return passing === 1 ? [] : [`${path}: matches ${passing} of the allowed shapes, not exactly one`]
  }
  if (schema.type !== undefined && !matchesType(schema.type, value)) {
    return [`${path}: expected ${schema.type}, got ${typeOf(value)}`]
  }
  if (schema.const !== undefined && value !== schema.const) return [`${path}: must be ${JSON.stringify(schema.const)}`]
  if (schema.enum && !schema.enum.includes(value)) {
    return [`${path}: must be one of ${schema.enum.map(v => JSON.stringify(v)).join(', ')}`]
  }
  const problems = []
  if (schema.type === 'object') {
    const properties = schema.properties ?? {}
    for (const name of schema.required ?? []) {
      if (!Object.hasOwn(value, name)) problems.push(`${path}.${name}: required`)
    }
    for (const [name, item] of Object.entries(value)) {
      if (Object.hasOwn(properties, name)) problems.push(...validate(properties[name], item, `${path}.${name}`))
      else if (schema.additionalProperties === false) problems.push(`${path}.${name}: unexpected`)
    }
  }
  if (schema.type === 'array' && schema.items) {
    value.forEach((item, i) => problems.push(...validate(schema.items, item, `${path}[${i}]`)))
  }
  return problems
}

/** Shorthands for the schemas below. */
export const S = Object.freeze({
  string: description => (description ? { type: 'string', description } : { type: 'string' }),
  integer: description => (description ? { type: 'integer', description } : { type: 'integer' }),
  number: description => (description ? { type: 'number', description } : { type: 'number' }),
  boolean: description => (description ? { type: 'boolean', description } : { type: 'boolean' }),
  nullable: schema => ({ oneOf: [schema, { type: 'null' }] }),
  object: (properties, required = Object.keys(properties)) => ({
    type: 'object', properties, required, additionalProperties: false,
  }),
  array: items => ({ type: 'array', items }),
})
