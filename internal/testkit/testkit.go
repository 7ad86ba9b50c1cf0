// Package testkit is the home of firstmate's test kits: the wire fakes of
// the platforms and the model (fakeslack, faketelegram, fakellm, fakemcp),
// the policy screens' environment (policytest), the Markdown corpus
// (mdtest) and file snapshots (fstest). Production packages never import
// it; a dependency test says so.
package testkit

// TB is the part of testing.TB the kits use; *testing.T and *testing.B
// satisfy it, and so does a load generator's own.
type TB interface {
	Helper()
	Cleanup(func())
}
