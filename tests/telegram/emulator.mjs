// telegram-test-api (npm, 4.2.x) as the Telegram server for tactful's
// emulator test: its own routes and storage serve the bots, and its client
// API plays the people. Driven over stdin/stdout in JSON lines by
// crates/tactful/tests/telegram_emulator.rs.
//
// A thin wrapper in front fixes only the gaps of the emulator that no
// real Bot API server has (each checked against the package's source):
//   - getMe answers one made-up bot for every token, without the fields
//     the Bot API documents (can_join_groups, ...): answered per token;
//   - editMessageText answers `result: null` (Telegram: the message) and
//     deleteMessage `result: null` (Telegram: true): the package's own
//     handlers do the work, the answer is corrected;
//   - setMessageReaction (Bot API 7.0), which every real server has and
//     the package lacks: checked as the Bot API documents it (the message
//     must exist in the chat, one reaction of type "emoji" from the list
//     bots may use) and kept, so the test sees what a person would.
// What a real server may also do is left as it is, for tactful to cope
// with: getUpdates answers at once (no long poll), and methods the
// package lacks (sendChatAction) fail with HTTP 500.
//
// Usage: node emulator.mjs '{"7001:token": {"username": "docs_bot", "name": "Docs"}, ...}'
// Prints {"ready": "<bot API base URL>"}, then answers one line per command:
//   {"op": "say", "token", "user": {id, first_name, username}, "chat": {id, type, title},
//    "text", "extra": {entities, reply_to_message, ...}}  ->  {"message_id": n}
//   {"op": "bot_messages"}  ->  {"messages": [{message_id, token, chat_id, text,
//                                 parse_mode, reply_to, thread}]}
//   {"op": "calls"}  ->  {"calls": [{token, method, status}]}
//   {"op": "reactions"}  ->  {"reactions": [{token, chat_id, message_id, emoji: [..]}]}

import http from 'node:http';
import readline from 'node:readline';
import express from 'express';
// The package's main export is the server class itself (CommonJS).
import TelegramServer from 'telegram-test-api';

const bots = JSON.parse(process.argv[2] || '{}');
const server = new TelegramServer({ port: 0, host: '127.0.0.1', storeTimeout: 3600 });
const calls = [];

const app = express();
app.use(express.json());
// Every bot call, with the status it got (method names are
// case-insensitive, as on Telegram: teloxide sends `GetMe`).
app.use((req, res, next) => {
  const m = req.path.match(/^\/bot([^/]+)\/([^/]+)$/);
  if (m) {
    res.on('finish', () => calls.push({ token: m[1], method: m[2], status: res.statusCode }));
  }
  next();
});
app.all('/bot:token/getMe', (req, res) => {
  const bot = bots[req.params.token];
  if (!bot) {
    res.status(401).json({ ok: false, error_code: 401, description: 'Unauthorized' });
    return;
  }
  res.json({
    ok: true,
    result: {
      id: Number(req.params.token.split(':')[0]),
      is_bot: true,
      first_name: bot.name,
      username: bot.username,
      can_join_groups: true,
      can_read_all_group_messages: true,
      supports_inline_queries: false,
      has_main_web_app: false,
    },
  });
});
const stored = (chatId, messageId) => server.storage.botMessages.find(
  (u) => String(u.messageId) === String(messageId) && String(u.message.chat_id) === String(chatId),
);
const asMessage = (u, token) => ({
  message_id: u.messageId,
  date: Math.floor(u.time / 1000),
  chat: { id: Number(u.message.chat_id), type: 'supergroup', title: 'chat' },
  from: { id: Number(token.split(':')[0]), is_bot: true, first_name: bots[token]?.name || 'bot' },
  text: u.message.text,
});
app.all('/bot:token/editMessageText', (req, res, next) => {
  // The package's handler edits its storage; the answer is Telegram's.
  const send = res.json.bind(res);
  res.json = (body) => {
    const u = stored(req.body.chat_id, req.body.message_id);
    if (body && body.ok && body.result === null && u) {
      return send({ ok: true, result: asMessage(u, req.params.token) });
    }
    return send(body);
  };
  next();
});
// The emoji a bot may react with (the Bot API's ReactionTypeEmoji).
const REACTION_EMOJI = new Set(['👍', '👎', '❤', '🔥', '🥰', '👏', '😁', '🤔', '🤯', '😱', '🤬',
  '😢', '🎉', '🤩', '🤮', '💩', '🙏', '👌', '🕊', '🤡', '🥱', '🥴', '😍', '🐳', '❤‍🔥', '🌚', '🌭',
  '💯', '🤣', '⚡', '🍌', '🏆', '💔', '🤨', '😐', '🍓', '🍾', '💋', '🖕', '😈', '😴', '😭', '🤓',
  '👻', '👨‍💻', '👀', '🎃', '🙈', '😇', '😨', '🤝', '✍', '🤗', '🫡', '🎅', '🎄', '☃', '💅', '🤪',
  '🗿', '🆒', '💘', '🙉', '🦄', '😘', '💊', '🙊', '😎', '👾', '🤷‍♂', '🤷', '🤷‍♀', '😡']);
const reactions = [];
app.all('/bot:token/setMessageReaction', (req, res) => {
  const bad = (what) => res.status(400).json({ ok: false, error_code: 400, description: `Bad Request: ${what}` });
  if (!bots[req.params.token]) {
    res.status(401).json({ ok: false, error_code: 401, description: 'Unauthorized' });
    return;
  }
  const p = { ...req.query, ...req.body };
  let reaction = p.reaction ?? [];
  if (typeof reaction === 'string') {
    try {
      reaction = JSON.parse(reaction);
    } catch {
      bad("can't parse reaction types JSON object");
      return;
    }
  }
  if (p.chat_id === undefined || p.message_id === undefined) {
    bad('chat_id and message_id are required');
    return;
  }
  const chatOf = (u) => String(u.message.chat ? u.message.chat.id : u.message.chat_id);
  const exists = [...server.storage.userMessages, ...server.storage.botMessages].some(
    (u) => u.message && String(u.messageId) === String(p.message_id) && chatOf(u) === String(p.chat_id),
  );
  if (!exists) {
    bad('message to react not found');
    return;
  }
  if (!Array.isArray(reaction)) {
    bad("can't parse reaction types JSON object");
    return;
  }
  if (reaction.length > 1) {
    bad('REACTIONS_TOO_MANY');
    return;
  }
  if (reaction.some((r) => !r || r.type !== 'emoji' || !REACTION_EMOJI.has(r.emoji))) {
    bad('REACTION_INVALID');
    return;
  }
  reactions.push({
    token: req.params.token,
    chat_id: Number(p.chat_id),
    message_id: Number(p.message_id),
    emoji: reaction.map((r) => r.emoji),
  });
  res.json({ ok: true, result: true });
});
app.all('/bot:token/deleteMessage', (req, res, next) => {
  const send = res.json.bind(res);
  res.json = (body) => send(body && body.ok && body.result === null ? { ok: true, result: true } : body);
  next();
});
app.use(server.webServer);

const listener = http.createServer(app);
listener.listen(0, '127.0.0.1', () => {
  const { port } = listener.address();
  server.config.apiURL = `http://127.0.0.1:${port}`;
  console.log(JSON.stringify({ ready: `http://127.0.0.1:${port}` }));
});

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', async (line) => {
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (e) {
    console.log(JSON.stringify({ error: `not JSON: ${e}` }));
    return;
  }
  try {
    if (cmd.op === 'say') {
      const client = server.getClient(cmd.token, {
        userId: cmd.user.id,
        firstName: cmd.user.first_name,
        userName: cmd.user.username,
        chatId: cmd.chat.id,
        chatTitle: cmd.chat.title,
        type: cmd.chat.type,
      });
      const id = server.messageId;
      await client.sendMessage(client.makeMessage(cmd.text, cmd.extra || {}));
      console.log(JSON.stringify({ message_id: id }));
    } else if (cmd.op === 'bot_messages') {
      const messages = server.storage.botMessages.map((u) => ({
        message_id: u.messageId,
        token: u.botToken,
        chat_id: Number(u.message.chat_id),
        text: u.message.text,
        parse_mode: u.message.parse_mode || null,
        reply_to: u.message.reply_parameters ? Number(u.message.reply_parameters.message_id) : null,
        thread: u.message.message_thread_id ?? null,
      }));
      console.log(JSON.stringify({ messages }));
    } else if (cmd.op === 'reactions') {
      console.log(JSON.stringify({ reactions }));
    } else if (cmd.op === 'calls') {
      console.log(JSON.stringify({ calls }));
    } else {
      console.log(JSON.stringify({ error: `unknown op ${cmd.op}` }));
    }
  } catch (e) {
    console.log(JSON.stringify({ error: String(e) }));
  }
});
rl.on('close', () => process.exit(0));
