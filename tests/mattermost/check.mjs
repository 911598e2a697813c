// The Mattermost double, checked by Mattermost's own client library
// (@mattermost/client: Client4 for REST, WebSocketClient for the event
// stream) and against the shapes Mattermost's own types give
// (@mattermost/types): every field a type requires must be in what the
// double sends, with the right kind of value. Run by
// crates/tactful/tests/mattermost_client.rs:
//   node check.mjs <server url> <alice's token> <a bot's token>
// Prints one line per check; exits non-zero on the first that fails.

import {createRequire} from 'node:module';
import {readFileSync} from 'node:fs';
import WS from 'ws';

const require = createRequire(import.meta.url);
const {Client4, ClientError, WebSocketClient} = require('@mattermost/client');

// The client is written for browsers: a WebSocket and CloseEvent global.
globalThis.WebSocket = WS;
globalThis.CloseEvent = class CloseEvent extends Event {
    constructor(type, init = {}) {
        super(type);
        this.code = init.code;
        this.wasClean = init.wasClean;
    }
};

const [url, aliceToken, botToken] = process.argv.slice(2);

function fail(what) {
    console.log(`FAIL ${what}`);
    process.exit(1);
}

function ok(what) {
    console.log(`ok ${what}`);
}

// The fields a type of @mattermost/types requires, with the JavaScript
// kind of each, read from its declaration file.
function required(file, name) {
    const text = readFileSync(new URL(`./node_modules/@mattermost/types/lib/${file}.d.ts`, import.meta.url), 'utf8');
    const start = text.indexOf(`export type ${name} = {`);
    if (start < 0) {
        fail(`no type ${name} in ${file}.d.ts`);
    }
    // The body: to the brace closing the type, comments skipped.
    let depth = 0;
    let body = '';
    for (let i = text.indexOf('{', start); i < text.length; i++) {
        if (text.startsWith('/*', i)) {
            i = text.indexOf('*/', i) + 1;
            continue;
        }
        const c = text[i];
        if (c === '{') {
            depth++;
        } else if (c === '}') {
            depth--;
            if (depth === 0) {
                break;
            }
        }
        if (depth === 1 && c !== '{') {
            body += c;
        } else if (depth > 1) {
            body += ' ';
        }
    }
    const fields = {};
    for (const line of body.split(';')) {
        const m = line.trim().match(/^(\w+)(\??):\s*(.+)$/);
        if (!m || m[2] === '?') {
            continue;
        }
        const ts = m[3].trim();
        let kind = 'object';
        if (ts === 'string' || /^(PostType|ChannelType|TeamType)$/.test(ts) || /^'/.test(ts)) {
            kind = 'string';
        } else if (ts === 'number') {
            kind = 'number';
        } else if (ts === 'boolean') {
            kind = 'boolean';
        } else if (/^(any|unknown)$/.test(ts)) {
            kind = 'any';
        }
        fields[m[1]] = kind;
    }
    if (Object.keys(fields).length < 3) {
        fail(`read too few fields of ${name}: ${JSON.stringify(fields)}`);
    }
    return fields;
}

// The fields the server leaves out of a user it sends (sanitised, or
// empty and omitted), though the type lists them.
const USER_OMITTED = ['password'];

function shaped(what, value, fields, omitted = []) {
    if (value === null || typeof value !== 'object') {
        fail(`${what} is not an object: ${JSON.stringify(value)}`);
    }
    for (const [field, kind] of Object.entries(fields)) {
        if (omitted.includes(field)) {
            continue;
        }
        if (!(field in value)) {
            fail(`${what} has no ${field} (the type requires it): ${JSON.stringify(value)}`);
        }
        const got = Array.isArray(value[field]) ? 'object' : typeof value[field];
        if (kind !== 'any' && got !== kind && value[field] !== null) {
            fail(`${what}.${field} is a ${got}, the type says ${kind}`);
        }
    }
}

async function rejects(what, call, check) {
    try {
        await call();
    } catch (e) {
        if (!(e instanceof ClientError) && !(e instanceof Error)) {
            fail(`${what}: threw ${e}`);
        }
        check(e);
        ok(what);
        return;
    }
    fail(`${what}: no error`);
}

const types = {
    user: required('users', 'UserProfile'),
    channel: required('channels', 'Channel'),
    member: required('channels', 'ChannelMembership'),
    post: required('posts', 'Post'),
    list: required('posts', 'PostList'),
    reaction: required('reactions', 'Reaction'),
    team: required('teams', 'Team'),
};
ok(`read the types (Post requires ${Object.keys(types.post).length} fields)`);

const alice = new Client4();
alice.setUrl(url);
alice.setToken(aliceToken);
const bot = new Client4();
bot.setUrl(url);
bot.setToken(botToken);

// REST, as the web app and tactful use it.
const me = await alice.getMe();
shaped('users/me', me, types.user, USER_OMITTED);
const botMe = await bot.getMe();
if (!botMe.is_bot) {
    fail('a bot account says is_bot');
}
ok('users/me');
const town = await alice.getChannelByNameAndTeamName('myteam', 'town-square');
shaped('a channel by name', town, types.channel);
shaped('a channel by id', await alice.getChannel(town.id), types.channel);
shaped('a membership', await alice.getMyChannelMember(town.id), types.member);
const teams = await bot.getMyTeams();
if (!Array.isArray(teams) || !teams.some((t) => t.id === town.team_id)) {
    fail(`the bot's teams lack town-square's: ${JSON.stringify(teams)}`);
}
teams.forEach((t) => shaped('one of my teams', t, types.team));
const mine = await bot.getMyChannels(town.team_id);
if (!Array.isArray(mine) || !mine.some((c) => c.id === town.id)) {
    fail(`the bot's channels lack town-square: ${JSON.stringify(mine)}`);
}
mine.forEach((c) => shaped('one of my channels', c, types.channel));
ok('channels');

const since = Date.now() - 1;
const question = await alice.createPost({channel_id: town.id, message: 'checked by @mattermost/client'});
shaped('a new post', question, types.post);
const answer = await bot.createPost({channel_id: town.id, message: 'an answer', root_id: question.id});
if (answer.root_id !== question.id) {
    fail('a reply keeps its root_id');
}
const patched = await bot.patchPost({id: answer.id, message: 'an answer, edited'});
shaped('a patched post', patched, types.post);
if (patched.message !== 'an answer, edited' || !(patched.edit_at > 0)) {
    fail(`the patch shows: ${JSON.stringify(patched)}`);
}
const list = await bot.getPostsSince(town.id, since);
shaped('posts since', list, types.list);
Object.values(list.posts).forEach((p) => shaped('a post in a list', p, types.post));
if (!list.order.includes(question.id) || !list.order.includes(answer.id)) {
    fail(`posts since lack the new posts: ${JSON.stringify(list.order)}`);
}
const thread = await bot.getPostThread(question.id);
shaped('a thread', thread, types.list);
if (!thread.order.includes(answer.id)) {
    fail('the thread holds its reply');
}
const reaction = await bot.addReaction(botMe.id, question.id, 'eyes');
shaped('a reaction', reaction, types.reaction);
await bot.deletePost(answer.id);
const config = await bot.getClientConfig();
if (!(Number(config.MaxPostSize) > 0)) {
    fail(`MaxPostSize is no size: ${JSON.stringify(config.MaxPostSize)}`);
}
ok('posts, threads, patches, reactions, deletions, the client config');

// Errors as the client reads them: the server's id and status.
const stranger = new Client4();
stranger.setUrl(url);
stranger.setToken('wrongtoken0000000000000000');
await rejects('a wrong token', () => stranger.getMe(), (e) => {
    if (e.status_code !== 401 || !e.server_error_id) {
        fail(`a wrong token: ${JSON.stringify(e)}`);
    }
});
await rejects('a channel that is not there', () => alice.getChannelByNameAndTeamName('myteam', 'nowhere'), (e) => {
    if (e.status_code !== 404 || !e.server_error_id) {
        fail(`a missing channel: ${JSON.stringify(e)}`);
    }
});
const reply = await bot.createPost({channel_id: town.id, message: 'a reply', root_id: question.id});
await rejects('a reply to a reply', () => bot.createPost({channel_id: town.id, message: 'x', root_id: reply.id}), (e) => {
    if (e.status_code !== 400 || !e.server_error_id) {
        fail(`a reply to a reply: ${JSON.stringify(e)}`);
    }
});

// The event stream, as the web app's client reads it. A socket that
// carries its token when it opens (as tactful's does, and the web app's
// cookie) can resume its connection; one authenticated by
// `authentication_challenge` afterwards cannot, as on the server.
async function until(what, pred, events) {
    const end = Date.now() + 10000;
    while (!pred()) {
        if (Date.now() > end) {
            fail(`${what}; events: ${JSON.stringify(events)}`);
        }
        await new Promise((r) => setTimeout(r, 20));
    }
}

function stream(headers) {
    const events = [];
    const state = {events, missed: 0, reconnects: 0};
    const ws = new WebSocketClient({
        newWebSocketFn: (u) => new WS(u, {headers}),
        minWebSocketRetryTime: 50,
        reconnectJitterRange: 10,
    });
    ws.addMessageListener((m) => events.push(m));
    ws.addMissedMessageListener(() => state.missed++);
    ws.addReconnectListener(() => state.reconnects++);
    ws.initialize(url.replace(/^http/, 'ws') + '/api/v4/websocket', aliceToken);
    state.ws = ws;
    return state;
}

const postedId = (e, id) => e.event === 'posted' && JSON.parse(e.data.post).id === id;
const open = (st) => st.ws.conn !== null && st.ws.conn.readyState === WS.OPEN;

const a = stream({Authorization: `Bearer ${aliceToken}`});
await until('a hello', () => a.events.some((e) => e.event === 'hello'), a.events);
const hello = a.events.find((e) => e.event === 'hello');
if (hello.seq !== 0 || !hello.data.connection_id) {
    fail(`hello: ${JSON.stringify(hello)}`);
}
const live = await bot.createPost({channel_id: town.id, message: 'heard live'});
await until('the live post', () => a.events.some((e) => postedId(e, live.id)), a.events);
const posted = a.events.find((e) => postedId(e, live.id));
shaped('a posted event\'s post', JSON.parse(posted.data.post), types.post);
if (posted.data.channel_type !== 'O' || typeof posted.data.sender_name !== 'string' || posted.broadcast.channel_id !== town.id) {
    fail(`posted: ${JSON.stringify(posted)}`);
}
ok('hello and posted');

// A dropped socket: the client resumes by connection id and sequence
// number, and what was posted meanwhile arrives, none missed.
const connection = a.ws.connectionId;
a.ws.conn.close();
const meanwhile = await bot.createPost({channel_id: town.id, message: 'posted while the socket was down'});
await until('a reconnection', () => a.reconnects === 1 && open(a), a.events);
await until('the post made while down', () => a.events.some((e) => postedId(e, meanwhile.id)), a.events);
if (a.missed !== 0 || a.ws.connectionId !== connection) {
    fail(`the resume was not lossless: missed ${a.missed}, connection ${a.ws.connectionId} (was ${connection})`);
}
ok('a resume by sequence number');

// A connection the server does not know: a new hello, and the client is
// told to fetch what it missed.
a.ws.connectionId = 'unknown0000000000000000000';
await until('an open socket', () => open(a), a.events);
a.ws.conn.close();
await until('a second hello', () => a.events.filter((e) => e.event === 'hello').length === 2, a.events);
if (a.missed !== 1) {
    fail(`an unknown connection was not reported as missed events (${a.missed})`);
}
ok('a resume the server cannot make');
a.ws.close();

// Authenticated by challenge only: every reconnection is a new
// connection.
const b = stream({});
await until('a hello by challenge', () => b.events.some((e) => e.event === 'hello') && open(b), b.events);
b.ws.conn.close();
await until('a new hello', () => b.events.filter((e) => e.event === 'hello').length === 2, b.events);
if (b.missed !== 1) {
    fail(`a challenge-authenticated socket resumed (${b.missed})`);
}
ok('no resume without a token on the upgrade');
b.ws.close();
process.exit(0);
