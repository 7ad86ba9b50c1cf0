// Package check tests what deploy/ ships: the Dockerfile (read with
// BuildKit's own parser), the compose file, the Helm chart (linted and
// rendered with Helm's library, every object decoded strictly into the
// Kubernetes API types), the seccomp profile (derived from Docker's
// default) and the systemd unit. It is a module of its own so that the
// main module does not carry BuildKit, Helm and Kubernetes in its
// dependencies; `make test` runs it after the main tests.
package check
