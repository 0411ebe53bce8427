// Package localtest makes provider/local runtimes for the tests of other
// packages (fakes' backends, file tools, interpreters, runs) whose
// sandboxes must be real but never reach the network.
package localtest
