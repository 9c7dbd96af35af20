/** Small helpers for writing CloudFormation in TypeScript (the template's parts, ./*.ts). */

/** Resources (or parameters, outputs) by logical id. */
export type Section = Record<string, Record<string, unknown>>;

export const ref = (name: string) => ({ Ref: name });
export const getAtt = (name: string, attribute: string) => ({ 'Fn::GetAtt': [name, attribute] });
export const sub = (text: string) => ({ 'Fn::Sub': text });
export const ifCondition = (condition: string, then: unknown, otherwise: unknown) => ({ 'Fn::If': [condition, then, otherwise] });
export const NO_VALUE = { Ref: 'AWS::NoValue' };

/** Tags every resource that takes them carries. */
export function nameTag(suffix: string): { Key: string; Value: unknown }[] {
  return [{ Key: 'Name', Value: sub(`\${AWS::StackName}-${suffix}`) }];
}

/** An IAM policy document of `statements`. */
export function policy(statements: unknown[]): Record<string, unknown> {
  return { Version: '2012-10-17', Statement: statements };
}
