package main

import (
	"net/url"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The README's main job must keep working on the default provider and on
// the fake, and on a Docker Engine when the tests have one.
func TestQuickstart(t *testing.T) {
	urls := []string{"", "memory://"}
	if host := os.Getenv("SANDBOX_TEST_DOCKER"); host != "" {
		image := os.Getenv("SANDBOX_TEST_DOCKER_IMAGE")
		if image == "" {
			image = "sandboxkit/busybox:test"
		}
		urls = append(urls, "docker://?"+url.Values{"host": {host}, "image": {image}}.Encode())
	}
	for _, url := range urls {
		if err := run(url); err != nil {
			t.Errorf("run(%q): %v", url, err)
		}
	}
}
