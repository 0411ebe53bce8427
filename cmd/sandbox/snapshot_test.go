package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCLISnapshotAndFork(t *testing.T) {
	t.Parallel()
	for name, url := range providers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			id := createSandbox(t, url)
			mustOK(t, invoke(t, url, nil, "exec", id, "--", "sh", "-c", "printf v1 > state.txt"), "exec write")
			r := mustOK(t, invoke(t, url, nil, "snapshot", id, "--name", "base", "--label", "cli=yes"), "snapshot")
			snap := strings.TrimSpace(r.stdout)
			if snap == "" || strings.Contains(snap, "\n") {
				t.Fatalf("snapshot printed %q, want one id", r.stdout)
			}
			defer invoke(t, url, nil, "snapshot-rm", snap)
			mustOK(t, invoke(t, url, nil, "exec", id, "--", "sh", "-c", "printf v2 > state.txt"), "exec change")

			r = mustOK(t, invoke(t, url, nil, "--json", "snapshots", "--label", "cli=yes"), "snapshots")
			var list []snapshotJSON
			if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || list[0].ID != snap || list[0].Name != "base" || list[0].SourceID != id || list[0].Mode != "filesystem" {
				t.Fatalf("snapshots --json = %s (%v), want the one snapshot", r.stdout, err)
			}
			r = mustOK(t, invoke(t, url, nil, "snapshots"), "snapshots table")
			if !strings.Contains(r.stdout, snap) || !strings.Contains(r.stdout, "cli=yes") {
				t.Errorf("snapshots table lacks %s: %q", snap, r.stdout)
			}

			child := createSandbox(t, url, "--from-snapshot", snap)
			r = mustOK(t, invoke(t, url, nil, "exec", child, "--", "cat", "state.txt"), "cat in child")
			if r.stdout != "v1" {
				t.Errorf("sandbox from the snapshot sees %q, want v1", r.stdout)
			}

			r = mustOK(t, invoke(t, url, nil, "fork", id, "-n", "2", "--label", "forked=yes"), "fork")
			kids := strings.Fields(r.stdout)
			if len(kids) != 2 || kids[0] == kids[1] {
				t.Fatalf("fork -n 2 printed %q", r.stdout)
			}
			for _, k := range kids {
				r = mustOK(t, invoke(t, url, nil, "exec", k, "--", "cat", "state.txt"), "cat in fork child")
				if r.stdout != "v2" {
					t.Errorf("fork child %s sees %q, want the parent's current v2", k, r.stdout)
				}
			}
			r = mustOK(t, invoke(t, url, nil, "--json", "ls", "--label", "forked=yes"), "ls forked")
			if strings.Count(r.stdout, `"id"`) != 2 {
				t.Errorf("ls --label forked=yes: %s", r.stdout)
			}

			mustOK(t, invoke(t, url, nil, "snapshot-rm", snap), "snapshot-rm")
			mustOK(t, invoke(t, url, nil, "snapshot-rm", snap), "snapshot-rm again")
			r = invoke(t, url, nil, "create", "--from-snapshot", snap)
			if r.code == 0 || !strings.Contains(r.stderr, "not found") {
				t.Errorf("create from a deleted snapshot: exit %d, stderr %q; want a not-found error", r.code, r.stderr)
			}
		})
	}
}

func TestCLISnapshotBadInput(t *testing.T) {
	t.Parallel()
	url := "memory://" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + randomHex(4)
	t.Cleanup(func() { destroyAll(t, url) })
	id := createSandbox(t, url)
	for _, args := range [][]string{
		{"snapshot", id, "--mode", "memory"},
		{"snapshot", id, "--label", "novalue"},
		{"fork", id, "-n", "0"},
		{"create", "--template", "x", "--from-snapshot", "y"},
		{"snapshot-rm"},
	} {
		r := invoke(t, url, nil, args...)
		if r.code != 125 || !strings.Contains(r.stderr, "InvalidArgument") {
			t.Errorf("%v: exit %d (stderr %q), want the usage error's 125, InvalidArgument", args, r.code, r.stderr)
		}
	}
	r := invoke(t, url, nil, "snapshot", id, "--mode", "full")
	if r.code == 0 || !strings.Contains(r.stderr, "full") {
		t.Errorf("snapshot --mode full on memory: exit %d, stderr %q", r.code, r.stderr)
	}
}
