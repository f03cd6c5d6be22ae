package mm2import

import (
	"strings"
	"testing"
)

func TestJavaOnly(t *testing.T) {
	for pattern, want := range map[string]string{
		`orders\..*`:          "",
		`(?i)Orders|pay-\d+`:  "",
		`\Qa.b\E`:             "",
		`(?<team>[a-z]+)\..*`: "",
		`(?!tmp).*`:           "cannot compile",
		`a*+`:                 "cannot compile",
		`(a)\1`:               "cannot compile",
		`.*\Z`:                "cannot compile",
		`\p{javaLowerCase}+`:  "cannot compile",
		`[a-z&&[^q]]+`:        "intersection",
		`(?U)\w+`:             "flag U",
		`a\vb`:                `\v`,
	} {
		got := javaOnly(pattern)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("javaOnly(%q) = %q, want %q", pattern, got, want)
		}
	}
}

func TestSplitList(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "",
		"  ":               "",
		" a , b,c ,, d ":   "a|b|c||d",
		"foo.*, bar.*":     "foo.*|bar.*",
		"a{1,3}":           "a{1|3}", // as MM2 splits it: a comma never belongs to a pattern
		"x\t,\ty":          "x|y",
		"single-pattern.*": "single-pattern.*",
	} {
		if got := strings.Join(splitList(in), "|"); got != want {
			t.Errorf("splitList(%q) = %q, want %q", in, got, want)
		}
	}
}
