// The splits of a world folder that the editor's Distill offers (`agentLab.buildWorld` and
// `agent-lab world` write them; the distill job in the worker reads them).

export type Split = 'train' | 'heldout';
export const SPLITS: readonly Split[] = ['train', 'heldout'];
