//! The quiz's static pages.

pub(super) const HOME: &str = r#"<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Quiz night</title></head>
<body>
<h1>Quiz night</h1>
<p>Join your table's game with the code on the screen. Answers close when the host moves on.</p>
</body>
</html>
"#;

/// A player's page: answers and the game's state over the socket, polling while the socket
/// cannot be opened (every 10 s, or the `Retry-After` a refusal gives), trying the socket
/// again every 5–6 s. `?game=&participant=`, and `&ws=ws://host:port` where the socket is
/// served elsewhere.
pub(super) const PLAY: &str = r#"<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Quiz night: play</title></head>
<body>
<h1>Quiz night</h1>
<p>Connected by <span id="mode">nothing yet</span>; polls: <span id="polls">0</span>.</p>
<p id="state"></p>
<script>
const q = new URLSearchParams(location.search);
const game = encodeURIComponent(q.get("game") || "g1");
const me = q.get("participant") || "player";
const wsBase = q.get("ws") || ((location.protocol === "https:" ? "wss://" : "ws://") + location.host);
let mode = "", polls = 0, chain = 0;
function show(m) { mode = m; document.getElementById("mode").textContent = m; }
function connect() {
  const s = new WebSocket(wsBase + "/api/games/" + game + "/ws?participant=" + encodeURIComponent(me));
  s.onopen = () => show("socket");
  s.onmessage = (e) => { document.getElementById("state").textContent = e.data; };
  s.onclose = () => {
    if (mode !== "polling") { show("polling"); chain += 1; poll(chain); }
    setTimeout(connect, 5000 + Math.random() * 1000);
  };
}
// One chain of polls at a time: a chain left from an earlier outage stops by itself.
async function poll(c) {
  if (mode !== "polling" || c !== chain) return;
  let wait = 10;
  try {
    const r = await fetch("/api/games/" + game + "/poll", { headers: { "x-participant-id": me } });
    if (r.status === 429) {
      wait = Math.max(wait, parseInt(r.headers.get("retry-after") || "10", 10));
    } else {
      polls += 1;
      document.getElementById("polls").textContent = String(polls);
      document.getElementById("state").textContent = await r.text();
    }
  } catch (e) {}
  setTimeout(() => poll(c), wait * 1000);
}
connect();
</script>
</body>
</html>
"#;

pub(super) const TOO_MANY_REQUESTS: &str = r#"<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Slow down a little</title></head>
<body>
<h1>Slow down a little</h1>
<p>Your device sent more requests than the quiz can take right now. Wait {wait},
then go back and carry on: your answers so far are safe.</p>
<p><a href="/">Back to the quiz</a></p>
</body>
</html>
"#;

pub(super) const ROBOTS: &str = "User-agent: *\nDisallow: /too-many-requests\nDisallow: /api\nDisallow: /auth\nDisallow: /host\nDisallow: /webhooks\n";
