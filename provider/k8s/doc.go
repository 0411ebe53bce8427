// Package k8s is the sandbox provider for Kubernetes clusters that run
// kubernetes-sigs/agent-sandbox: a sandbox is a SandboxClaim (group
// agents.x-k8s.io, v1beta1) on a SandboxWarmPool of a SandboxTemplate,
// and commands and files go to the sandboxd daemon in its pod (its gRPC
// ProcessService and its REST file API, KEP-539.2).
//
// Importing the package registers the "k8s" scheme with sandbox.Open:
//
//	k8s://NAMESPACE?template=NAME
//	k8s://NAMESPACE?warm_pool=NAME&router_url=http://sandbox-router.agent-sandbox:8080
//
// The cluster is found as kubectl finds it (the in-cluster service account,
// $KUBECONFIG, ~/.kube/config) unless kubeconfig= and context= name one.
// The package lives in a module of its own so the core module never
// depends on client-go. See README.md for what a cluster needs.
package k8s
