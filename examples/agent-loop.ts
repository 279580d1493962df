/**
 * An agent-style loop: look (a screenshot of the instance and the page's text), decide, act
 * through the page, until the goal is reached. A real agent would send the screenshot to a
 * model; `decide` here is a few rules, so the example runs offline.
 *
 *   node --import tsx examples/agent-loop.ts
 */
import { openSession } from 'burrow-sandbox';
import { serve } from './local-site.js';

// A three-step signup wizard to get through.
await using site = await serve({
  '/': `<title>Wizard</title><h1 id="step">Step 1: your name</h1>
    <input id="name"><button id="next">Next</button>
    <script>
      const steps = ['Step 2: your plan', 'Step 3: confirm', 'Done: welcome aboard'];
      let i = 0;
      document.getElementById('next').onclick = () => {
        if (!document.getElementById('name').value) return;
        document.getElementById('step').textContent = steps[i++];
        if (i === steps.length) document.getElementById('next').remove();
      };
    </script>`,
});

type Action =
  | { kind: 'type'; selector: string; text: string }
  | { kind: 'click'; selector: string }
  | { kind: 'done' };

/** The "model": maps what it sees to the next action. */
function decide(observation: { heading: string; nameFilled: boolean }): Action {
  if (observation.heading.startsWith('Done')) return { kind: 'done' };
  if (!observation.nameFilled) return { kind: 'type', selector: '#name', text: 'Ada' };
  return { kind: 'click', selector: '#next' };
}

await using session = await openSession();
const { page } = session;
await page.goto(site.url);

for (let turn = 1; turn <= 10; turn++) {
  const screenshot = await session.screenshot(); // what a vision model would get
  const observation = {
    heading: (await page.textContent('#step')) ?? '',
    nameFilled: (await page.inputValue('#name')) !== '',
  };
  const action = decide(observation);
  console.log(
    `turn ${turn}: saw "${observation.heading}" (${screenshot.length} byte PNG) → ${action.kind}`,
  );
  if (action.kind === 'done') break;
  if (action.kind === 'type') await page.fill(action.selector, action.text);
  else await page.click(action.selector);
}
