package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/internal/httpapi"
)

func cmdStatus(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", "Prints what a running worker reports on GET /api/v1/status: each mirror's state and\nlag, its topics (state, lag, the error of a failed one) and, in cluster mode, the\nworkers of the mirror, the slots each owns, which one runs the control plane and\nthe lag of this worker's slots; then the brokers the worker cannot reach, with\nwhat to check. The worker is the one at --url, or the one that\nlistens on http.listen of --config.\nExit status 0 when the worker (with --mirror, that mirror) is ready, 3 when not, 1 on\nerror (no worker answers, a refused token), 2 on bad usage.", stderr)
	path := configFlag(fs, "the config file; the worker listens on its http.listen")
	url := fs.String("url", "", "the worker's HTTP address, e.g. http://127.0.0.1:9644 (instead of --config; with it, --config gives only the token and the scheme)")
	out := outputFlag(fs)
	timeout := timeoutFlag(fs)
	tokenFile := fs.String("token-file", "", "file holding the bearer token (http.auth); with --config, the config's token is used when this is not set")
	caFile := fs.String("ca-file", "", "PEM CAs to verify the worker's certificate with (https; default: the system's roots)")
	certFile := fs.String("cert-file", "", "PEM client certificate, for a worker that requires one (http.tls.client_ca_file)")
	keyFile := fs.String("key-file", "", "PEM key of --cert-file")
	mirror := fs.String("mirror", "", "only this mirror")
	topic := fs.String("topic", "", "only the topics whose source or target name contains this")
	state := fs.String("state", "", "only the topics in these states, comma-separated: pending, mirroring, failed")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	var token bearerToken
	base := strings.TrimSuffix(*url, "/")
	// --config alone names the worker; with --url too, it only gives the
	// token (and the scheme) for the worker at --url.
	configSet := false
	fs.Visit(func(f *flag.Flag) { configSet = configSet || f.Name == "config" })
	if base == "" || configSet {
		cfg, _ := loadForCommand(*path, stderr)
		if cfg == nil {
			return exitError
		}
		if cfg.HTTP.Auth != nil {
			token = configToken(cfg.HTTP.Auth, *path)
		}
		if base == "" {
			var err error
			if base, err = statusURL(cfg.HTTP.Listen, cfg.HTTP.TLS != nil); err != nil {
				fmt.Fprintf(stderr, "%s: http.listen: %v\n", *path, err)
				return exitError
			}
		} else if !strings.Contains(base, "://") && cfg.HTTP.TLS != nil {
			base = "https://" + base
		}
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		base = "http://" + base
	}
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "--token-file: %v\n", err)
			return exitError
		}
		token = bearerToken{value: strings.TrimSpace(string(b)), from: *tokenFile}
	}
	client, err := statusClient(*caFile, *certFile, *keyFile)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	query := neturl.Values{}
	for k, v := range map[string]string{"mirror": *mirror, "topic": *topic, "state": *state} {
		if v != "" {
			query.Set(k, v)
		}
	}
	endpoint := base + "/api/v1/status"
	if len(query) > 0 {
		endpoint += "?" + query.Encode()
	}
	st, err := fetchStatus(ctx, client, endpoint, token)
	if err != nil {
		fmt.Fprintf(stderr, "status: %v\n", err)
		return exitError
	}
	if *mirror != "" && len(st.Mirrors) == 0 {
		fmt.Fprintf(stderr, "status: --mirror: the worker runs no mirror named %q\n", *mirror)
		return exitError
	}
	if out.JSON() {
		writeJSON(stdout, st)
	} else {
		printStatus(stdout, st, time.Now())
	}
	return readyExit(st, *mirror != "", stderr)
}

// readyExit is status's exit code: 0 when the worker is ready (or, with
// --mirror, that mirror is), 3 when not, naming the mirrors not ready: a
// script or a deploy gate waits on it without parsing the output.
func readyExit(st httpapi.StatusResponse, oneMirror bool, stderr io.Writer) int {
	var notReady []string
	for _, m := range st.Mirrors {
		if !m.Ready {
			notReady = append(notReady, m.Name)
		}
	}
	if len(notReady) == 0 && (oneMirror || st.Ready) {
		return exitOK
	}
	fmt.Fprintf(stderr, "status: not ready: %s\n", orDash(strings.Join(notReady, ", ")))
	return exitNegative
}

// statusClient is the HTTP client for a worker, with the TLS settings of
// the flags.
func statusClient(caFile, certFile, keyFile string) (*http.Client, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return http.DefaultClient, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file: no PEM certificate in %s", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--cert-file and --key-file go together")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert-file/--key-file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment}}, nil
}

// statusURL is where a worker listening on listen answers (https when it
// serves TLS): a wildcard host is reached on loopback.
func statusURL(listen string, https bool) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", err
	}
	if port == "0" {
		return "", fmt.Errorf("%q picks a free port at start: pass the worker's address with --url (its log line \"http server listening\" names it)", listen)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	scheme := "http://"
	if https {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(host, port), nil
}

// bearerToken is the token status sends, with where it was read, for the
// message when the worker refuses it.
type bearerToken struct {
	value string
	from  string // "wrong.token", "token (http.auth.bearer_token_file of kmirror.yaml)"
}

// configToken is the token of a worker's config, http.auth.
func configToken(auth *config.HTTPAuth, configPath string) bearerToken {
	from := fmt.Sprintf("%s (http.auth.bearer_token_file of %s)", auth.BearerTokenFile, configPath)
	if auth.BearerTokenEnv != "" {
		from = fmt.Sprintf("$%s (http.auth.bearer_token_env of %s)", auth.BearerTokenEnv, configPath)
	}
	return bearerToken{value: auth.Token().Reveal(), from: from}
}

func fetchStatus(ctx context.Context, client *http.Client, url string, token bearerToken) (httpapi.StatusResponse, error) {
	var st httpapi.StatusResponse
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return st, err
	}
	if token.value != "" {
		req.Header.Set("Authorization", "Bearer "+token.value)
	}
	resp, err := client.Do(req)
	if err != nil {
		return st, fmt.Errorf("is a worker running? %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return st, fmt.Errorf("GET %s: %w", url, err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized && token.value != "":
		// Not the hint for no token: the token was sent, and is
		// the wrong one (another worker's, an old one).
		return st, fmt.Errorf("the worker refused the token in %s: GET %s: %s: %s", token.from, url, resp.Status, apiError(body))
	case resp.StatusCode == http.StatusUnauthorized:
		return st, fmt.Errorf("GET %s: %s: the worker requires a bearer token (http.auth): pass --token-file, or --config with the worker's config", url, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return st, fmt.Errorf("GET %s: %s: %s", url, resp.Status, apiError(body))
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("GET %s: not a kmirror status: %w", url, err)
	}
	return st, nil
}

// apiError is the message of an API error answer ({"error": "..."}), or
// the body as it is when it is not one.
func apiError(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err == nil && e.Error != "" {
		return e.Error
	}
	return strings.TrimSpace(string(body))
}

// printTopicRanges lists the topics' source gaps (offsets the source
// deleted before they were copied) and divergent tails (a mirror copying
// back after a failover: target records the former target never got).
func printTopicRanges(w io.Writer, topics []connector.TopicStatus) {
	for _, t := range topics {
		for _, g := range t.SourceGaps {
			fmt.Fprintf(w, "  source gap %s/%d: offsets %d..%d (%s lost, %s)\n", t.SourceTopic, g.Partition, g.From, g.To, plural(int(g.Records), "offset"), g.State)
		}
		for _, d := range t.Divergent {
			fmt.Fprintf(w, "  divergent tail %s/%d: offsets %d..%d (%s the former target never got)\n", t.TargetTopic, d.Partition, d.From, d.To, plural(int(d.Records), "record"))
		}
	}
}

// printStatus writes the overview: a paragraph per mirror.
func printStatus(w io.Writer, st httpapi.StatusResponse, now time.Time) {
	if len(st.Mirrors) == 0 {
		fmt.Fprintln(w, "no mirrors")
		return
	}
	for i, m := range st.Mirrors {
		if i > 0 {
			fmt.Fprintln(w)
		}
		state := "ready"
		if !m.Ready {
			state = "not ready"
		}
		pass := "no pass yet"
		if !m.LastPassAt.IsZero() {
			pass = "last pass " + now.Sub(m.LastPassAt).Round(time.Second).String() + " ago"
		}
		lag := "lag " + lagText(m.Lag, m.LagUnknownSince, now, "record")
		if m.Lag == nil {
			lag += " (the source's end offsets could not be read)"
		}
		fmt.Fprintf(w, "MIRROR %s (%s -> %s): %s, %s, %s\n", m.Name, m.Source, m.Target, state, lag, pass)
		if m.LastPassError != "" {
			fmt.Fprintf(w, "  last pass failed: %s\n", m.LastPassError)
		}
		if m.Fenced != "" {
			fmt.Fprintf(w, "  copying nothing: %s (docs/disaster-recovery.md)\n", m.Fenced)
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		if len(m.Topics) > 0 {
			fmt.Fprintln(tw, "  SOURCE TOPIC\tTARGET TOPIC\tPARTITIONS\tSTATE\tLAG\tERROR")
			for _, t := range m.Topics {
				fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\n", t.SourceTopic, t.TargetTopic, t.Partitions, t.State, lagText(t.Lag, t.LagUnknownSince, now, ""), t.Error)
			}
			_ = tw.Flush()
			printTopicRanges(w, m.Topics)
		} else {
			fmt.Fprintln(tw, "  no topics selected")
		}
		_ = tw.Flush()
		if m.Cluster != nil {
			printCluster(w, m.Cluster)
		}
	}
	for _, c := range st.Clusters {
		for _, f := range c.Failing {
			fmt.Fprintf(w, "\nCLUSTER %s: broker %s failing for %s (%s): %s\n  %s\n", c.Alias, f.Address,
				now.Sub(f.Since).Round(time.Second), plural(f.Failures, "failure"), f.Error, f.Check)
		}
	}
}

// lagText is a lag as the status prints it: the records (with unit, when
// one is given), or for how long it has been unknown ("?" when that is not
// said): unknown is not 0.
func lagText(records *int64, unknownSince, now time.Time, unit string) string {
	switch {
	case records == nil && unknownSince.IsZero():
		return "?"
	case records == nil:
		return "unknown for " + now.Sub(unknownSince).Round(time.Second).String()
	case unit != "":
		return plural(int(*records), unit)
	default:
		return strconv.FormatInt(*records, 10)
	}
}

func printCluster(w io.Writer, c *connector.ClusterStatus) {
	control := "no"
	if c.ControlPlane {
		control = "yes"
	}
	fmt.Fprintf(w, "  CLUSTER: %d slots; this worker %s owns %s, control plane: %s\n", c.Slots, c.Member, formatSlots(c.Owned), control)
	if r := c.Rebalance; r != nil && r.NotSettling {
		fmt.Fprintf(w, "  GROUP NOT SETTLING: in a rebalance since %s, waiting for %s", r.Since.Format(time.RFC3339), r.WaitingFor)
		if r.Error != "" {
			fmt.Fprintf(w, "; last error: %s", r.Error)
		}
		fmt.Fprintln(w)
	}
	if c.WorkersError != "" {
		fmt.Fprintf(w, "  workers as last described (describing the group failed: %s)\n", c.WorkersError)
	}
	if len(c.Unowned) > 0 {
		fmt.Fprintf(w, "  SLOTS WITHOUT AN OWNER: %s (not copied)\n", formatSlots(c.Unowned))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  WORKER\tCLIENT ID\tHOST\tSLOTS\tCONTROL PLANE")
	for _, wk := range c.Workers {
		cp := ""
		if wk.ControlPlane {
			cp = "yes"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", wk.Member, wk.ClientID, wk.Host, formatSlots(wk.Slots), cp)
	}
	_ = tw.Flush()
	if len(c.SlotLag) > 0 {
		slots := make([]int32, 0, len(c.SlotLag))
		for s := range c.SlotLag {
			slots = append(slots, s)
		}
		slices.Sort(slots)
		var parts []string
		for _, s := range slots {
			parts = append(parts, fmt.Sprintf("%d:%s", s, lagText(c.SlotLag[s], time.Time{}, time.Time{}, "")))
		}
		fmt.Fprintf(w, "  lag of this worker's slots (slot:records): %s\n", strings.Join(parts, " "))
	}
}

// formatSlots prints slot numbers compactly: [0-3 7 9-10].
func formatSlots(ss []int32) string {
	if len(ss) == 0 {
		return "[]"
	}
	s := slices.Clone(ss)
	slices.Sort(s)
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", s[i], s[j]))
		} else {
			parts = append(parts, fmt.Sprint(s[i]))
		}
		i = j + 1
	}
	return "[" + strings.Join(parts, " ") + "]"
}
