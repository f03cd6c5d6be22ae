package mm2import

import (
	"regexp"
	"strings"
)

// splitList splits a value as Kafka's ConfigDef LIST type does: the value
// trimmed, then split on commas with the blanks around them; an empty value
// is an empty list.
func splitList(v string) []string {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	return commaRE.Split(v, -1)
}

var commaRE = regexp.MustCompile(`\s*,\s*`)

// javaOnly says why a Java regular expression (MM2's topic, group and
// config lists use java.util.regex) does not mean the same in Go's RE2, or
// "" when it does as far as can be told. Constructs RE2 lacks
// (lookaround, backreferences, possessive quantifiers, \Z, Java's own
// classes) fail to compile; a few compile in Go but mean something else.
func javaOnly(pattern string) string {
	if _, err := regexp.Compile(pattern); err != nil {
		return "a Java regular expression Go's RE2 cannot compile (" + strings.TrimPrefix(err.Error(), "error parsing regexp: ") + "): rewrite it without lookaround, backreferences or possessive quantifiers"
	}
	switch {
	case classIntersection.MatchString(pattern):
		return "uses a character class intersection (&&), which Go reads as literal characters: rewrite the class"
	case ungreedyFlag.MatchString(pattern):
		return "sets the flag U, which is UNICODE_CHARACTER_CLASS in Java and ungreedy matching in Go: drop it"
	case strings.Contains(pattern, `\v`) && !strings.Contains(pattern, `\\v`):
		return `uses \v, any vertical white space in Java and only the vertical tab in Go: write [\n\x0B\f\r\x85\x{2028}\x{2029}]`
	}
	return ""
}

var (
	classIntersection = regexp.MustCompile(`\[[^\]]*&&`)
	ungreedyFlag      = regexp.MustCompile(`\(\?[a-zA-Z]*U`)
)
