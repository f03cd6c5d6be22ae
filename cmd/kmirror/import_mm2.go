package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kmirror/kmirror/internal/mm2import"
)

const importMM2Summary = `Converts a MirrorMaker 2 (dedicated mode) properties file, or a Strimzi KafkaMirrorMaker2
resource (kafka.strimzi.io/v1beta2 or v1), into a kmirror config: clusters with their security,
one mirror per enabled flow (per Strimzi mirror), each taking over where MM2 stopped
(mirrors[].mm2). The YAML goes to stdout (or --output); every setting it could not carry over
is listed on stderr with the reason (for a resource, with its path: spec.mirrors[0]...), and so
are the environment variables the YAML reads (passwords are never printed).

A file with a "kind: KafkaMirrorMaker2" line (or any file, with --strimzi) is read as
Kubernetes YAML; other documents in it are skipped, and --name picks one of several
KafkaMirrorMaker2 resources. Its Secrets become files under /etc/kmirror/secrets/<secret>/<key>
(password_file, ca_file, cert_file, key_file), and --helm-values writes the values of the
Helm chart deploy/helm/kmirror: replicaCount, config (the same config), secretMounts (those
Secrets) and resources.

Exit status 0 when everything was mapped, 3 when something was not (review the list), 1 on
error (unreadable file, syntax error, a resource Strimzi would refuse), 2 on bad usage.

Usage: kmirror import-mm2 [--output FILE] [--helm-values FILE] [--strimzi] [--name NAME] FILE`

type importOptions struct {
	output, helmValues, name string
	strimzi                  bool
}

func cmdImportMM2(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("import-mm2", importMM2Summary, stderr)
	var o importOptions
	fs.StringVar(&o.output, "output", "", "write the YAML to this file instead of stdout")
	fs.StringVar(&o.helmValues, "helm-values", "", "also write the Helm chart's values to this file (a Strimzi resource only)")
	fs.BoolVar(&o.strimzi, "strimzi", false, "read the file as a Strimzi KafkaMirrorMaker2 resource whatever it holds")
	fs.StringVar(&o.name, "name", "", "the KafkaMirrorMaker2 to convert (metadata.name) when the file holds several")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "import-mm2: want the MirrorMaker 2 properties file or the Strimzi resource")
		fs.Usage()
		return exitUsage
	}
	// Flags may also follow the file name.
	file := fs.Arg(0)
	if code := parse(fs, fs.Args()[1:]); code >= 0 {
		return code
	}
	data, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "import-mm2: %v\n", err)
		return exitError
	}
	if o.strimzi || mm2import.IsStrimzi(data) {
		return importStrimzi(data, file, o, stdout, stderr)
	}
	if o.helmValues != "" || o.name != "" {
		// The chart sets no environment variables, which the passwords of
		// a properties file's conversion come from.
		fmt.Fprintf(stderr, "import-mm2: %s: --helm-values and --name are for a Strimzi KafkaMirrorMaker2 resource (no \"kind: KafkaMirrorMaker2\" line in it)\n", file)
		return exitUsage
	}
	return importMM2(data, file, o.output, stdout, stderr)
}

func importMM2(data []byte, file, output string, stdout, stderr io.Writer) int {
	props, err := mm2import.ParseProperties(data)
	var se *mm2import.SyntaxError
	if errors.As(err, &se) {
		fmt.Fprintf(stderr, "import-mm2: %s:%d: %s\n", file, se.Line, se.Msg)
		return exitError
	}
	res, err := mm2import.Convert(props, file)
	if err != nil {
		printImportError(file, err, stderr)
		return exitError
	}
	if !writeOut(output, res.YAML, stdout, stderr) {
		return exitError
	}
	return report(file, res, stderr)
}

func importStrimzi(data []byte, file string, o importOptions, stdout, stderr io.Writer) int {
	res, err := mm2import.ConvertStrimzi(data, file, o.name)
	if err != nil {
		printImportError(file, err, stderr)
		return exitError
	}
	if !writeOut(o.output, res.YAML, stdout, stderr) {
		return exitError
	}
	if o.helmValues != "" && !writeOut(o.helmValues, res.Values, stdout, stderr) {
		return exitError
	}
	return report(file, &res.Result, stderr)
}

// printImportError prints an *InputError as file:line: key: message; a
// YAML syntax error (a *config.Error) names its file and line itself.
func printImportError(file string, err error, stderr io.Writer) {
	var ie *mm2import.InputError
	switch {
	case errors.As(err, &ie) && ie.Line > 0:
		fmt.Fprintf(stderr, "import-mm2: %s:%d: %s: %s\n", file, ie.Line, ie.Key, ie.Msg)
	case errors.As(err, &ie):
		fmt.Fprintf(stderr, "import-mm2: %s: %v\n", file, err)
	default:
		fmt.Fprintf(stderr, "import-mm2: %v\n", err)
	}
}

// writeOut writes data to the file named output, or to stdout when there
// is none.
func writeOut(output string, data []byte, stdout, stderr io.Writer) bool {
	var err error
	if output != "" {
		err = os.WriteFile(output, data, 0o644)
	} else {
		_, err = stdout.Write(data)
	}
	if err != nil {
		fmt.Fprintf(stderr, "import-mm2: %v\n", err)
		return false
	}
	return true
}

// report lists on stderr what was not mapped, not needed, and the
// environment the YAML reads, and returns the exit status.
func report(file string, res *mm2import.Result, stderr io.Writer) int {
	for _, n := range res.Unmapped {
		fmt.Fprintf(stderr, "%s: not mapped: %s\n", where(file, n), n.Reason)
	}
	for _, n := range res.Ignored {
		fmt.Fprintf(stderr, "%s: not needed: %s\n", where(file, n), n.Reason)
	}
	for _, e := range res.Env {
		fmt.Fprintf(stderr, "set %s to %s\n", e.Name, e.What)
	}
	if len(res.Unmapped) > 0 {
		fmt.Fprintf(stderr, "import-mm2: %d setting(s) not mapped (listed above): review the YAML before use\n", len(res.Unmapped))
		return exitNegative
	}
	return exitOK
}

// where is "file:line: key" (no line for a note about no single line).
func where(file string, n mm2import.Note) string {
	if n.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", file, n.Line, n.Key)
	}
	return fmt.Sprintf("%s: %s", file, n.Key)
}
