package openai

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCreateContent(t *testing.T) {
	t.Parallel()
	got, err := createContent("+package main\n+\n+func main() {}\n")
	require.NoError(t, err)
	require.Equal(t, "package main\n\nfunc main() {}\n", got)

	got, err = createContent("")
	require.NoError(t, err)
	require.Equal(t, "", got)

	// The envelope of the multi-file format is tolerated.
	got, err = createContent("*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch\n")
	require.NoError(t, err)
	require.Equal(t, "a\n", got)

	_, err = createContent("+ok\nnot a plus line\n")
	var pe *patchError
	require.True(t, errors.As(err, &pe))
	require.Contains(t, err.Error(), "line 2")
}

func TestApplyUpdate(t *testing.T) {
	t.Parallel()
	src := "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n\nfunc other() {\n\tfmt.Println(\"hi\")\n}\n"
	cases := []struct {
		name, text, diff, want string
	}{
		{
			name: "one hunk",
			text: "a\nb\nc\n",
			diff: " a\n-b\n+B\n c\n",
			want: "a\nB\nc\n",
		},
		{
			name: "anchor picks the second of two identical contexts",
			text: src,
			diff: "@@ func other() {\n-\tfmt.Println(\"hi\")\n+\tfmt.Println(\"other\")\n }\n",
			want: strings.Replace(src, "func other() {\n\tfmt.Println(\"hi\")", "func other() {\n\tfmt.Println(\"other\")", 1),
		},
		{
			name: "two hunks",
			text: "1\n2\n3\n4\n5\n6\n7\n8\n",
			diff: "@@\n 1\n-2\n+two\n 3\n@@\n 6\n-7\n+seven\n",
			want: "1\ntwo\n3\n4\n5\n6\nseven\n8\n",
		},
		{
			name: "add at end of file",
			text: "a\nb\n",
			diff: " b\n+c\n*** End of File\n",
			want: "a\nb\nc\n",
		},
		{
			name: "whitespace fuzz",
			text: "x  \ny\n",
			diff: " x\n-y\n+z\n",
			want: "x  \nz\n",
		},
		{
			name: "crlf kept",
			text: "a\r\nb\r\n",
			diff: " a\n-b\n+c\n",
			want: "a\r\nc\r\n",
		},
		{
			name: "empty context line without its space",
			text: "a\n\nb\n",
			diff: " a\n\n-b\n+c\n",
			want: "a\n\nc\n",
		},
		{
			name: "pure insertion at the top",
			text: "a\n",
			diff: "+first\n a\n",
			want: "first\na\n",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := applyUpdate(c.text, c.diff)
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestApplyUpdateRefuses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, text, diff, msg string
	}{
		{"context not found", "a\nb\n", " x\n-b\n+c\n", "not found"},
		{"second hunk does not match", "a\nb\nc\n", "@@\n-a\n+A\n@@\n-zzz\n+Z\n", "zzz"},
		{"removed line differs", "a\nb\n", " a\n-B!\n+c\n", "not found"},
		{"bad prefix", "a\n", " a\n*b\n", "must start with"},
		{"empty", "a\n", "", "empty"},
		{"other file's section", "a\n", " a\n*** Delete File: b\n", "one file"},
		{"eof context not at end", "a\nb\nc\n", " a\n+x\n*** End of File\n", "end of the file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := applyUpdate(c.text, c.diff)
			var pe *patchError
			require.True(t, errors.As(err, &pe), "got %q, %v", got, err)
			require.Contains(t, err.Error(), c.msg)
			require.Empty(t, got)
		})
	}
}
