// Package deptest holds the test that keeps firstmate's dependency rule
// (ARCHITECTURE.md, "Packages and the dependency rule"): which package may
// know which. It has no code of its own.
package deptest
