/**
 * The page the vendor agent examples work on (agent-anthropic.ts, agent-openai.ts): a text field
 * and a button at fixed places; pressing the button with "burrow" in the field shows a banner.
 * The scripted stand-ins for the models know these places; a real model finds them on screen.
 */

/** Boxes in page (= screen) pixels of a 1024×768 browser instance. */
export const FIELD = { x: 100, y: 100, w: 300, h: 40 };
export const BUTTON = { x: 450, y: 100, w: 120, h: 40 };
export const WORD = 'burrow';

export const TASK = `On the screen there is a web form. Type the word "${WORD}" into its text field, press the Send button, and then tell me what the banner that appears says.`;

export const center = (b: { x: number; y: number; w: number; h: number }): [number, number] => [
  b.x + b.w / 2,
  b.y + b.h / 2,
];

const box = (b: typeof FIELD) =>
  `position:absolute;left:${b.x}px;top:${b.y}px;width:${b.w}px;height:${b.h}px;box-sizing:border-box`;

export const FORM_PAGE = `<!doctype html><html><head><meta charset="utf-8"><title>Agent form</title></head>
<body style="margin:0;background:#fff;font:18px sans-serif">
  <input id="word" aria-label="Word" style="${box(FIELD)};border:3px solid #335">
  <button id="send" style="${box(BUTTON)}">Send</button>
  <p id="banner" style="position:absolute;left:100px;top:200px;font-size:28px"></p>
  <script>
    document.getElementById('send').onclick = () => {
      const word = document.getElementById('word').value;
      document.getElementById('banner').textContent =
        word === ${JSON.stringify(WORD)} ? 'Thanks, ' + word + '!' : 'That is not the word';
    };
  </script>
</body></html>`;
