#!/usr/bin/env bash
# Starts the real app under Xvfb on a fresh config and cache (so it opens on
# the bundled demo pair) and writes, into OUT_DIR:
#   main.png        the Models page on a first start: the demo pair, the
#                   devices and what each will hold
#   chat.png        the Chat page after Load (Ctrl+L) and one message typed
#                   on the first try, "Quote Genesis 1:3.": the demo's greedy
#                   answer, a verse of Genesis 1, with its numbers (captured on a
#                   second start that reopens on it, after frames.json is written)
#   code.png        the Chat page reopened on a conversation this script
#                   writes (a fake answer holding two code blocks): code on
#                   its own background, coloured, each block with a Copy
#                   button, and Copy on each message
#   models-800x600.png  the Models page on an 800x600 screen on a first start
#                   (the no-GPU and demo-pair notes, one line each): the window
#                   fits it with every control of the page in view, unscrolled
#   simulated.png   the Models page on three simulated GPUs (tandem gui
#                   --simulate) with both demo models on GPU 0: its bar red,
#                   over by a few MiB, and the planner's fixes
#   simulated-fixed.png  the same after a click on the first fix's Apply:
#                   the draft on GPU 1, both bars within their memory; Load
#                   stays off (simulated devices are planned, not loaded)
#   find.png        the Find page on two simulated GPUs against a fake
#                   Hugging Face Hub on loopback (packaging/fakehub: the demo
#                   models of ../shared/models served slowly): a search, the
#                   first repository's files with each device's fit verdict
#                   from their remote headers, a download in progress, and
#                   the drafts the Hub has for the demo target
#   frames.json     the UI thread's frame gaps of the first run, per phase
#                   (startup, idle, loading, streaming), and how late work
#                   posted to it ran
#
#   packaging/screenshot.sh [OUT_DIR]     (default: packaging/screenshots)
#
# Needs xvfb, xdotool and imagemagick (make screenshots installs them);
# MODELS names another folder of the demo GGUF files.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-packaging/screenshots}")
mkdir -p "$out"
work=$(mktemp -d)
app_pid= xvfb_pid= xvfb2_pid= xvfb3_pid= hub_pid=
cleanup() {
	[ -n "$app_pid" ] && kill "$app_pid" 2>/dev/null || true
	[ -n "$hub_pid" ] && kill "$hub_pid" 2>/dev/null || true
	[ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null || true
	[ -n "$xvfb2_pid" ] && kill "$xvfb2_pid" 2>/dev/null || true
	[ -n "$xvfb3_pid" ] && kill "$xvfb3_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/tandem" .
go build -o "$work/fakehub" ./packaging/fakehub

display=:$((90 + RANDOM % 100))
# NICE=-10 raises the app and Xvfb above other work on a shared machine, so
# frames.json measures the app rather than its neighbours; on a machine
# loaded past its cores (a load average of 20 on 2) that is not enough, and
# RT=1 runs both round-robin at real-time priority 1 (root or CAP_SYS_NICE;
# the kernel's real-time throttling still leaves the neighbours 5%).
nice=(nice -n "${NICE:-0}")
if [ -n "${RT:-}" ]; then nice=(chrt -r 1 "${nice[@]}"); fi
"${nice[@]}" Xvfb "$display" -screen 0 1600x1000x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
xvfb_pid=$!
export DISPLAY=$display LANGUAGE=en GSETTINGS_BACKEND=memory NO_AT_BRIDGE=1
export XDG_CONFIG_HOME=$work/config XDG_CACHE_HOME=$work/cache
for _ in $(seq 50); do xdpyinfo >/dev/null 2>&1 && break; sleep 0.1; done

"${nice[@]}" "$work/tandem" gui --frame-stats "$out/frames.json" >"$work/app.log" 2>&1 &
app_pid=$!
mark() { echo "$(date +%s%3N) (Unix ms): $*"; }

# waitwin NAME: the id of the window titled NAME, once it is mapped.
waitwin() {
	for _ in $(seq 150); do
		local id
		id=$(xdotool search --onlyvisible --name "$1" 2>/dev/null | head -1 || true)
		if [ -n "$id" ]; then echo "$id"; return; fi
		sleep 0.2
	done
	echo "screenshot.sh: no window named $1; the app said:" >&2
	cat "$work/app.log" >&2
	exit 1
}

main=$(waitwin '^Tandem$')
sleep 4 # the demo pair is written to the cache, opened and planned
mark main window screenshot
import -window "$main" "$out/main.png"
mark loading

xdotool windowfocus "$main"
xdotool key --window "$main" ctrl+l
sleep 2 # the demo pair loads in well under a second; the prompt then has the focus
mark typing
xdotool type --delay 30 "Quote Genesis 1:3."
xdotool key ctrl+Return

# The conversation is saved with its finish reason once the answer is done.
answered() { grep -qs '"finish_reason"' "$XDG_CONFIG_HOME"/tandem/conversations/*.json; }
for _ in $(seq 300); do
	answered && break
	sleep 0.2
done
if ! answered; then
	echo "screenshot.sh: no answer was saved; the app said:" >&2
	cat "$work/app.log" >&2
	exit 1
fi
mark answer saved
# The first try's answer is the demo's greedy one: a verse of Genesis 1.
if ! grep -qs '"content": "And God said' "$XDG_CONFIG_HOME"/tandem/conversations/*.json; then
	echo "screenshot.sh: the demo did not answer with a verse of Genesis:" >&2
	cat "$XDG_CONFIG_HOME"/tandem/conversations/*.json >&2
	exit 1
fi
sleep 3 # the idle phase after an answer, measured with nothing else on the display
load=$(cut -d' ' -f1-3 /proc/loadavg) # frames.json's gaps depend on it
kill -TERM "$app_pid" # frames.json is written as the app exits
wait "$app_pid" || true
app_pid=

# chat.png from a second start that reopens on that conversation: a capture
# (import's GetImage on the single-threaded Xvfb) holds up the window's own
# drawing for 0.2-1.2 s, so it is never taken while frames are measured.
"${nice[@]}" "$work/tandem" gui >"$work/app.log" 2>&1 &
app_pid=$!
main=$(waitwin '^Tandem$')
sleep 3
xdotool windowfocus "$main"
xdotool key --window "$main" ctrl+t # the Chat page
sleep 1
mark chat screenshot
import -window "$main" "$out/chat.png"
kill -TERM "$app_pid"
wait "$app_pid" || true
app_pid=

# A conversation with code, as a model (or a remote server) would answer,
# newer than the one above so the window reopens on it.
now=$(date -u -d '+1 minute' +%Y-%m-%dT%H:%M:%SZ)
cat >"$XDG_CONFIG_HOME/tandem/conversations/29990101-000000.json" <<JSON
{
  "version": 1,
  "title": "Hello world in Go",
  "created": "$now",
  "updated": "$now",
  "revision": 1,
  "messages": [
    {"role": "user", "content": "Write hello world in Go, and say how to run it."},
    {"role": "assistant", "content": "Save this as \`main.go\`:\\n\\n\`\`\`go\\npackage main\\n\\nimport \\"fmt\\"\\n\\n// main greets the world.\\nfunc main() {\\n\\tfmt.Println(\\"Hello, world!\\", 42)\\n}\\n\`\`\`\\n\\nThen run it:\\n\\n\`\`\`sh\\ngo run main.go\\n\`\`\`",
     "stats": {"tokens": 61, "tok_s": 412.5, "drafted": 70, "accepted": 52, "finish_reason": "stop", "ttft_s": 0.04, "prompt_tokens": 24, "prefill_tok_s": 950}}
  ]
}
JSON
"${nice[@]}" "$work/tandem" gui >"$work/app.log" 2>&1 &
app_pid=$!
main=$(waitwin '^Tandem$')
sleep 3
xdotool windowfocus "$main"
xdotool key --window "$main" ctrl+t # the Chat page
sleep 1
mark code block screenshot
import -window "$main" "$out/code.png"
kill -TERM "$app_pid"
wait "$app_pid" || true
app_pid=

# The Models page on an 800x600 screen, on a fresh start.
display2=:$((190 + RANDOM % 100))
Xvfb "$display2" -screen 0 800x600x24 -nolisten tcp >"$work/xvfb2.log" 2>&1 &
xvfb2_pid=$!
for _ in $(seq 50); do DISPLAY=$display2 xdpyinfo >/dev/null 2>&1 && break; sleep 0.1; done
DISPLAY=$display2 XDG_CONFIG_HOME=$work/config800 "$work/tandem" gui >"$work/app.log" 2>&1 &
app_pid=$!
main=$(DISPLAY=$display2 waitwin '^Tandem$')
sleep 4
geometry=$(DISPLAY=$display2 xdotool getwindowgeometry "$main" | sed -n 's/ *Geometry: //p')
mark "800x600 screenshot (window $geometry)"
DISPLAY=$display2 import -window root "$out/models-800x600.png"
kill -TERM "$app_pid"
wait "$app_pid" || true
app_pid=
kill "$xvfb2_pid" 2>/dev/null || true
xvfb2_pid=
case $geometry in
[0-9]*x*) w=${geometry%x*} h=${geometry#*x}
	if [ "$w" -gt 800 ] || [ "$h" -gt 600 ]; then
		echo "screenshot.sh: on an 800x600 screen the window is $geometry" >&2
		exit 1
	fi ;;
esac

# Three simulated GPUs with 73 MiB each past the CUDA context: the demo
# pair on the first needs 86 MiB, so GPU 0 is red with the planner's fixes;
# the first, "Put the draft on GPU 1", is clicked and the layout fits. The
# window is made taller (on a taller screen) so the model cards show whole;
# the memory preview sits beside the device zones, in view at any size.
display3=:$((290 + RANDOM % 100))
Xvfb "$display3" -screen 0 1400x1200x24 -nolisten tcp >"$work/xvfb3.log" 2>&1 &
xvfb3_pid=$!
for _ in $(seq 50); do DISPLAY=$display3 xdpyinfo >/dev/null 2>&1 && break; sleep 0.1; done
sim=cuda:600MiB,cuda:600MiB,cuda:600MiB
DISPLAY=$display3 XDG_CONFIG_HOME=$work/config-sim "$work/tandem" gui --simulate "$sim" >"$work/app.log" 2>&1 &
app_pid=$!
main=$(DISPLAY=$display3 waitwin '^Tandem$')
sleep 4 # the demo pair is written, opened and planned
DISPLAY=$display3 xdotool windowmove "$main" 0 0 windowsize "$main" 1280 1150
sleep 3
mark simulated devices screenshot
DISPLAY=$display3 import -window "$main" "$out/simulated.png"
# Apply beside "Put the draft on GPU 1": a position in the taller window;
# the check below says if it missed.
DISPLAY=$display3 xdotool mousemove --window "$main" 1241 404 click 1
sleep 3
DISPLAY=$display3 import -window "$main" "$out/simulated-fixed.png"
kill -TERM "$app_pid"
wait "$app_pid" || true
app_pid=
kill "$xvfb3_pid" 2>/dev/null || true
xvfb3_pid=
if ! tr -d ' \n\t' <"$work/config-sim/tandem/settings.json" | grep -q '"simulation":{"spec":"[^"]*","layout":{[^}]*"draft_devices":\[1\]'; then
	echo "screenshot.sh: the click on Apply did not move the draft to GPU 1; the settings say:" >&2
	cat "$work/config-sim/tandem/settings.json" >&2
	exit 1
fi

models=$(realpath -m "${MODELS:-../shared/models}")
"$work/fakehub" --models "$models" --rate 250000 >"$work/hub.url" 2>"$work/hub.log" &
hub_pid=$!
for _ in $(seq 100); do [ -s "$work/hub.url" ] && break; sleep 0.1; done
if [ ! -s "$work/hub.url" ]; then
	echo "screenshot.sh: the fake Hub did not start:" >&2
	cat "$work/hub.log" >&2
	exit 1
fi
export HF_ENDPOINT=$(head -1 "$work/hub.url") HF_HOME=$work/hf HF_TOKEN= HF_HUB_OFFLINE=
export XDG_CONFIG_HOME=$work/config2
"${nice[@]}" "$work/tandem" gui --virtual-devices cuda0:60MiB,cuda0:128MiB >"$work/app.log" 2>&1 &
app_pid=$!
main=$(waitwin '^Tandem$')
sleep 3 # the demo pair is opened and planned
xdotool windowfocus "$main"
xdotool key --window "$main" ctrl+f
sleep 1
mark searching the fake Hub
xdotool type --delay 30 "factory"
xdotool key Return
sleep 5 # the search, the first repository's listing and headers, the demo target's drafts
# Download on the first file card. The page has no keyboard path to it, so
# this is a position in the 1280x820 window; the check below says if it missed.
xdotool mousemove --window "$main" 375 409 click 1
sleep 3
if ! ls "$HF_HOME"/hub/models--*/blobs/*.incomplete >/dev/null 2>&1; then
	echo "screenshot.sh: the click on Download started no download; the app said:" >&2
	cat "$work/app.log" >&2
	exit 1
fi
mark find page screenshot
import -window "$main" "$out/find.png"
kill -TERM "$app_pid"
wait "$app_pid" || true
app_pid=

cat <<NOTE
wrote, in $out:
  main.png            the Models page on a first start: the demo pair, devices, memory per device
  chat.png            "Quote Genesis 1:3." typed once after Load: the demo's verse, its numbers
  code.png            a conversation with two code blocks: background, colours, Copy buttons
  models-800x600.png  the Models page on an 800x600 screen (window $geometry)
  simulated.png       three simulated GPUs (--simulate $sim): GPU 0 red, the planner's fixes
  simulated-fixed.png the first fix applied by a click: the draft on GPU 1, both fit, Load off
  find.png            the Find page: a search, fit verdicts, a download, suggested drafts
  frames.json         frame gaps of the first run per phase (max_ms under 100 is the aim;
                      post_*: how late posted work ran), at a load average of $load:
NOTE
cat "$out/frames.json"
