// IAM policy evaluation for moto_iam.py: one JSON request per line on stdin, one
// JSON answer per line on stdout. The evaluator is @cloud-copilot/iam-simulate (all
// condition operators, explicit denies, resource policies, request validation
// against AWS's service reference), installed with the CDK CLI in infra/node_modules
// (JOINER_NODE_MODULES names that folder).
//
// Request: {"id", "principal", "action", "resource", "accountId", "context",
//           "identityPolicies": [doc...], "resourcePolicy": doc|null}
// Answer:  {"id", "result": "Allowed"|"ImplicitlyDenied"|"ExplicitlyDenied"|"Error", "detail"}
'use strict'
const path = require('node:path')
const readline = require('node:readline')
const { createRequire } = require('node:module')

const modules = process.env.JOINER_NODE_MODULES
if (!modules) {
  console.error('evaluate.cjs: JOINER_NODE_MODULES is not set')
  process.exit(2)
}
const { runSimulation } = createRequire(path.join(modules, 'noop.js'))('@cloud-copilot/iam-simulate')

async function evaluate(req) {
  const sim = {
    identityPolicies: req.identityPolicies.map((policy, i) => ({ name: `policy${i}`, policy })),
    serviceControlPolicies: [],
    resourceControlPolicies: [],
    request: {
      action: req.action,
      principal: req.principal,
      resource: { accountId: req.accountId, resource: req.resource },
      contextVariables: req.context || {},
    },
  }
  if (req.resourcePolicy) sim.resourcePolicy = req.resourcePolicy
  const r = await runSimulation(sim, {})
  if (r.resultType === 'error') return { result: 'Error', detail: JSON.stringify(r.errors) }
  return { result: r.overallResult, detail: '' }
}

const rl = readline.createInterface({ input: process.stdin })
rl.on('line', async (line) => {
  let req
  try {
    req = JSON.parse(line)
  } catch (e) {
    process.stdout.write(JSON.stringify({ id: null, result: 'Error', detail: 'bad request: ' + e.message }) + '\n')
    return
  }
  let out
  try {
    out = await evaluate(req)
  } catch (e) {
    out = { result: 'Error', detail: String((e && e.stack) || e) }
  }
  process.stdout.write(JSON.stringify({ id: req.id, ...out }) + '\n')
})
