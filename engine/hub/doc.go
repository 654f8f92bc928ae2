// Package hub finds and fetches GGUF models on the Hugging Face Hub: it
// searches model repositories, lists a repository's GGUF files (split
// files grouped into one model), reads a remote file's header and tensor
// index with HTTP range requests only (so the planner and the draft check
// run before anything is downloaded), and downloads into the Hub's own
// cache layout, resuming partial files and checking every byte against the
// SHA-256 the Hub publishes for it.
//
// It follows the Hub's conventions so files are shared with its other
// tools: HF_ENDPOINT, HF_TOKEN and the token file `hf auth login` writes,
// HF_HOME / HF_HUB_CACHE and the models--OWNER--NAME/{blobs,snapshots,refs}
// layout, the .locks directory, and HF_HUB_OFFLINE. No Go library speaks
// this API and layout; the few HTTP calls are written here over net/http.
// Retries are a loop of their own rather than a backoff library's because
// a retry during a download resumes where the last attempt stopped and
// counts only attempts that made no progress; the sleep between attempts
// is injected so tests run without waiting.
//
// Nothing partial is ever a model: a download is written to
// blobs/SHA.incomplete and becomes blobs/SHA (and the snapshot link) only
// after its size and hash match.
package hub
