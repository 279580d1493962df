// The hand-off banner on a live-view page (handoff.ts injects it): the message, the time left,
// and Done, which ends the hand-off with the token of the page's own query.
const box = document.getElementById('burrow-handoff');
const button = document.getElementById('burrow-handoff-done');
const expiry = document.getElementById('burrow-handoff-expiry');
const message = document.getElementById('burrow-handoff-message');
const expires = Date.parse(expiry.dataset.expires ?? '');
let ended = false;

function finish(text) {
  ended = true;
  button.disabled = true;
  button.hidden = true;
  expiry.textContent = '';
  message.textContent = text;
  box.dataset.state = 'ended';
}

function tick() {
  if (ended || !Number.isFinite(expires)) return;
  const left = Math.max(0, Math.round((expires - Date.now()) / 1000));
  expiry.textContent = `${Math.floor(left / 60)}:${String(left % 60).padStart(2, '0')} left`;
  if (left === 0) finish('This hand-off has expired.');
}
tick();
setInterval(tick, 1000);

button.addEventListener('click', async () => {
  if (ended) return;
  button.disabled = true;
  try {
    const res = await fetch(`./handoff/done${location.search}`, { method: 'POST' });
    if (res.ok) finish('Thank you. Control is back with the script; you can close this page.');
    else {
      const body = await res.json().catch(() => ({}));
      finish(`This hand-off has ended (${body.detail ?? res.status}).`);
    }
  } catch {
    button.disabled = false;
  }
});
