package sandboxtest

import (
	"slices"
	"strings"
	"testing"
)

// A provider that names a group the suite does not have learns which
// name, instead of silently running less than it meant to.
func TestSelectGroupsNamesUnknownGroup(t *testing.T) {
	t.Setenv(FullEnv, "")
	_, err := selectGroups("Groups", []string{"Exec", "Exce"})
	if err == nil || !strings.Contains(err.Error(), `"Exce"`) {
		t.Fatalf("selectGroups with a misspelt group: %v, want an error naming \"Exce\"", err)
	}
}

func TestSelectGroupsSubsetAndFull(t *testing.T) {
	t.Setenv(FullEnv, "")
	all, err := selectGroups("Groups", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(groups())+1 || !all[driverGroup] {
		t.Fatalf("no names selected %d groups (%v), want all %d and Driver", len(all), all, len(groups()))
	}
	sel, err := selectGroups("Groups", []string{"Exec", "Driver"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sel) != 2 || !sel["Exec"] || !sel[driverGroup] {
		t.Fatalf("selected %v, want Exec and Driver only", sel)
	}
	t.Setenv(FullEnv, "1")
	full, err := selectGroups("Groups", []string{"Exec"})
	if err != nil {
		t.Fatal(err)
	}
	if len(full) != len(all) {
		t.Fatalf("with %s=1 selected %v, want every group", FullEnv, full)
	}
}

// A configuration's short list replaces its groups under -short only, a
// full run (FullEnv) still runs every group, and a misspelt name in
// either list fails the run whether or not it is short.
func TestShortGroups(t *testing.T) {
	t.Setenv(FullEnv, "")
	h := Harness{Groups: []string{"Exec", "Files", "Watch"}, ShortGroups: []string{"Exec"}}
	plain, err := h.selection(false)
	if err != nil || len(plain) != 3 || !plain["Files"] {
		t.Fatalf("plain run selected %v, %v; want Exec, Files and Watch", plain, err)
	}
	short, err := h.selection(true)
	if err != nil || len(short) != 1 || !short["Exec"] {
		t.Fatalf("short run selected %v, %v; want Exec only", short, err)
	}
	if sel, err := (Harness{Groups: []string{"Exec", "Files"}}).selection(true); err != nil || len(sel) != 2 {
		t.Fatalf("short run without ShortGroups selected %v, %v; want Groups", sel, err)
	}
	for _, short := range []bool{false, true} {
		bad := Harness{Groups: []string{"Exec"}, ShortGroups: []string{"Exce"}}
		if _, err := bad.selection(short); err == nil || !strings.Contains(err.Error(), "ShortGroups") || !strings.Contains(err.Error(), `"Exce"`) {
			t.Errorf("short=%v with a misspelt short group: %v, want an error naming ShortGroups and \"Exce\"", short, err)
		}
	}
	t.Setenv(FullEnv, "1")
	if full, err := h.selection(true); err != nil || len(full) != len(groups())+1 {
		t.Fatalf("short run with %s=1 selected %v, %v; want every group", FullEnv, full, err)
	}
}

func TestParallelismFromEnv(t *testing.T) {
	for v, want := range map[string]int{"": defaultParallel, "1": 1, "8": 8} {
		t.Setenv(ParallelEnv, v)
		if n, err := parallelism(); err != nil || n != want {
			t.Errorf("%s=%q: %d, %v; want %d", ParallelEnv, v, n, err, want)
		}
	}
	for _, v := range []string{"0", "-2", "four"} {
		t.Setenv(ParallelEnv, v)
		if _, err := parallelism(); err == nil || !strings.Contains(err.Error(), ParallelEnv) {
			t.Errorf("%s=%q: error %v, want one naming the variable", ParallelEnv, v, err)
		}
	}
}

// The files of the package add subtests to the groups in init functions;
// the groups Run walks must hold them (a list taken before those init
// functions ran silently lost them).
func TestGroupsHoldSubtestsAddedAtInit(t *testing.T) {
	want := map[string][]string{
		"Exec":   {"OutputAfterFastExit", "ErrorTable", "PathLimits", "KilledBySignal"},
		"Files":  {"ErrorTable", "InterruptedUpload", "ReadThroughSymlink"},
		"Stress": {"ConcurrentExecExact"},
	}
	for _, g := range groups() {
		for _, name := range want[g.name] {
			if !slices.ContainsFunc(g.tests, func(tc test) bool { return tc.name == name }) {
				t.Errorf("group %s lacks %s, which its file adds at init", g.name, name)
			}
		}
		delete(want, g.name)
	}
	if len(want) != 0 {
		t.Errorf("groups missing: %v", want)
	}
}

// A Skip key that names no subtest would skip nothing, silently (a
// provider's skip of a case once never matched for months): Run refuses
// it, naming the key.
func TestCheckSkipNamesUnknownKeys(t *testing.T) {
	good := map[string]string{
		"Exec/ErrorTable":                               "a subtest",
		"Files/InterruptedUpload/NewFileCtxEnds":        "a case",
		"Files/ErrorTable/Unreadable/InClosedDirectory": "a case two levels down",
		"Driver/Anything":                               "drivertest checks its own",
	}
	if err := checkSkip(good); err != nil {
		t.Fatalf("checkSkip of known keys: %v", err)
	}
	for _, k := range []string{"Exec/Nope", "Exce/ErrorTable", "Files/InterruptedUpload/Nope", "Exec/ErrorTable/Unreadable", "Exec"} {
		err := checkSkip(map[string]string{"Exec/ErrorTable": "fine", k: "misspelt"})
		if err == nil || !strings.Contains(err.Error(), `"`+k+`"`) || strings.Contains(err.Error(), `"Exec/ErrorTable"`) {
			t.Errorf("checkSkip with %q: %v, want an error naming it alone", k, err)
		}
	}
}

func TestSubtestsListsAGroup(t *testing.T) {
	got := Subtests("Terminal")
	if len(got) != len(terminalTests) || !slices.Contains(got, "IsATTY") || !slices.Contains(got, "SignalAfterExit") {
		t.Errorf("Subtests(Terminal) = %v, want the %d terminal subtests", got, len(terminalTests))
	}
	if got := Subtests("NoSuchGroup"); len(got) != 0 {
		t.Errorf("Subtests(NoSuchGroup) = %v, want none", got)
	}
}
