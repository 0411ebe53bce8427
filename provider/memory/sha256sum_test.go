package memory_test

import "testing"

// sha256sum prints GNU's "HEX  NAME" lines, "-" naming standard input.
func TestSha256sum(t *testing.T) {
	sb, _ := newSandbox(t)
	const abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	const empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	out, _, code := run(t, sb, `printf abc > a; : > e; sha256sum a e; printf abc | sha256sum; command -v sha256sum`)
	want := abc + "  a\n" + empty + "  e\n" + abc + "  -\n"
	if code != 0 || len(out) <= len(want) || out[:len(want)] != want {
		t.Fatalf("sha256sum: %q (exit %d), want %q and its path", out, code, want)
	}
	if _, _, code := run(t, sb, `sha256sum missing`); code == 0 {
		t.Fatal("sha256sum of a missing file exited 0")
	}
}
