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
