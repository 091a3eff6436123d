// Command kube-apiserver is the Kubernetes API server, built from k8s.io/kubernetes for the
// chart's install tests (tests/deploy/apiserver.py): the same entry point as upstream's
// cmd/kube-apiserver.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
