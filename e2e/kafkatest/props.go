package kafkatest

import (
	"slices"
	"strings"
)

// StandardAuthorizer is the class name of KRaft's built-in authorizer.
const StandardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// AuthorizerProperties returns broker properties that turn on the
// StandardAuthorizer, with superUsers (principals such as "User:kmirror")
// allowed everything. User:ANONYMOUS, the principal of the PLAINTEXT and
// CONTROLLER listeners, is always a super user: the broker and controller
// talk to each other over them, and the tests' own clients use PLAINTEXT.
// Everybody else needs ACLs (allow.everyone.if.no.acl.found stays false).
//
// Merge the result into Config.Properties.
func AuthorizerProperties(superUsers ...string) map[string]string {
	users := []string{"User:ANONYMOUS"}
	for _, u := range superUsers {
		if !slices.Contains(users, u) {
			users = append(users, u)
		}
	}
	return map[string]string{
		"authorizer.class.name":          StandardAuthorizer,
		"super.users":                    strings.Join(users, ";"),
		"allow.everyone.if.no.acl.found": "false",
	}
}

// FastCompactionProperties returns broker properties under which the log
// cleaner picks up a dirty compacted log within a few hundred milliseconds
// instead of 15 seconds (log.cleaner.backoff.ms). Topics still need
// cleanup.policy=compact, a small segment.ms (the active segment is never
// cleaned; it rolls on the first append after segment.ms) and a small
// min.cleanable.dirty.ratio: see FastCompactionTopicConfigs.
func FastCompactionProperties() map[string]string {
	return map[string]string{
		"log.cleaner.backoff.ms":         "100",
		"log.cleaner.threads":            "1",
		"log.cleaner.dedupe.buffer.size": "16777216", // 16 MiB: tests' logs are small
		"log.segment.delete.delay.ms":    "1000",
	}
}

// FastCompactionTopicConfigs are topic configs that make a topic
// compactable right away on a broker with FastCompactionProperties.
func FastCompactionTopicConfigs() map[string]string {
	return map[string]string{
		"cleanup.policy":            "compact",
		"segment.ms":                "100",
		"min.cleanable.dirty.ratio": "0.01",
		"min.compaction.lag.ms":     "0",
	}
}
